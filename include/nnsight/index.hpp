// Index expressions for proxies, with Python's meaning:
//   x[{Slice(), -1}]        x[:, -1]
//   x[{Ellipsis, None}]     x[..., None]
//   x[{Slice(1, {}), 0}]    x[1:, 0]      ({} or std::nullopt: an open bound)
//   x[mask]                 boolean mask (a tensor or a proxy)
#pragma once

#include <cstdint>
#include <optional>

namespace nnsight {

struct Slice {
  std::optional<int64_t> start;  // nullopt: from the beginning; negative: from the end
  std::optional<int64_t> stop;   // nullopt: to the end; negative: from the end
  int64_t step = 1;              // > 0

  Slice(std::optional<int64_t> start_ = std::nullopt, std::optional<int64_t> stop_ = std::nullopt, int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};

struct EllipsisT {
  explicit constexpr EllipsisT() = default;
};
struct NoneT {
  explicit constexpr NoneT() = default;
};
// x[..., i] and x[None] (a new axis).
inline constexpr EllipsisT Ellipsis{};
inline constexpr NoneT None{};

}  // namespace nnsight
