// "[2, 3, 4]": a tensor's shape as error messages show it.
#pragma once

#include <string>

#include <absl/strings/str_join.h>

namespace nnsight {

// Any container of integers: std::vector<int64_t>, at::IntArrayRef, ...
template <typename Dims>
std::string shape_string(const Dims& dims) {
  return "[" + absl::StrJoin(dims, ", ") + "]";
}

}  // namespace nnsight
