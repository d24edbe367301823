#include "tp/shard_layout.h"

#include <c10/util/Exception.h>

#include <nnsight/error.hpp>

#include "tp/process_group.h"

namespace nnsight::tp {

RowRange even_split(int64_t total, int world, int rank, const std::string& what) {
  if (total % world != 0) {
    throw ConfigError(what + " (" + std::to_string(total) + ") is not divisible by the tensor-parallel size (" +
                      std::to_string(world) + ")");
  }
  const int64_t n = total / world;
  return RowRange{n * rank, n};
}

RowRange even_split(int64_t total, const ParallelContext& ctx, const std::string& what) {
  return even_split(total, ctx.world_size(), ctx.rank(), what);
}

ShardLayout::ShardLayout(int64_t whole, std::vector<std::vector<RowRange>> ranks)
    : whole_(whole), ranks_(std::move(ranks)) {
  TORCH_CHECK(!ranks_.empty() && whole_ > 0, "ShardLayout: empty layout");
  // owner[p]: position in the rank-ordered concatenation that supplies whole position p.
  std::vector<int64_t> owner(static_cast<size_t>(whole_), -1);
  int64_t offset = 0;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    int64_t local = 0;
    for (const auto& range : ranks_[r]) {
      TORCH_CHECK(range.start >= 0 && range.length > 0 && range.start + range.length <= whole_, "ShardLayout: range [",
                  range.start, ", +", range.length, ") outside [0, ", whole_, ")");
      for (int64_t i = 0; i < range.length; ++i) {
        int64_t& o = owner[static_cast<size_t>(range.start + i)];
        if (o < 0) o = offset + local + i;
      }
      local += range.length;
    }
    if (r == 0) local_ = local;
    TORCH_CHECK(local == local_, "ShardLayout: rank ", r, " holds ", local, " positions, rank 0 holds ", local_);
    offset += local;
  }
  for (int64_t p = 0; p < whole_; ++p) {
    const int64_t src = owner[static_cast<size_t>(p)];
    TORCH_CHECK(src >= 0, "ShardLayout: position ", p, " of ", whole_, " is held by no rank");
    if (!assembly_.empty()) {
      Run& last = assembly_.back();
      if (last.source + last.length == src && last.target + last.length == p) {
        ++last.length;
        continue;
      }
    }
    assembly_.push_back(Run{src, p, 1});
  }
}

ShardLayout ShardLayout::from(int64_t whole, int world, const std::function<std::vector<RowRange>(int)>& ranges_of) {
  std::vector<std::vector<RowRange>> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(ranges_of(r));
  return ShardLayout(whole, std::move(ranks));
}

ShardLayout ShardLayout::even(int64_t total, int world, const std::string& what) {
  return from(total, world, [&](int r) { return std::vector<RowRange>{even_split(total, world, r, what)}; });
}

ShardLayout ShardLayout::scaled(int64_t by) const {
  std::vector<std::vector<RowRange>> ranks = ranks_;
  for (auto& rr : ranks)
    for (auto& r : rr) r = RowRange{r.start * by, r.length * by};
  return ShardLayout(whole_ * by, std::move(ranks));
}

}  // namespace nnsight::tp
