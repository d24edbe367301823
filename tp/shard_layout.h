// ShardLayout: which parts of a whole dimension every tensor-parallel rank
// holds. Most splits are even ([r * n, (r + 1) * n) on rank r); GPT-2's fused
// c_attn holds three ranges per rank ([q | k | v] of its heads), and Llama's
// K/V projections hold one replicated KV head per group of ranks when there
// are fewer KV heads than ranks. Knowing every rank's ranges (not just its
// own) is what lets a gathered tensor come back in the unsharded order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nnsight::tp {

struct ParallelContext;

// Positions [start, start + length) of a whole dimension.
struct RowRange {
  int64_t start = 0;
  int64_t length = 0;
};

class ShardLayout {
 public:
  ShardLayout() = default;
  // ranks[r]: the whole-dimension ranges rank r holds, in the order its
  // local tensor stores them. Every rank must hold the same number of
  // positions, and together they must cover [0, whole) (TORCH_CHECK).
  ShardLayout(int64_t whole, std::vector<std::vector<RowRange>> ranks);
  // Builds a layout from a function of the rank.
  static ShardLayout from(int64_t whole, int world, const std::function<std::vector<RowRange>(int)>& ranges_of);
  // The even split of `total` over `world` ranks. Throws nnsight::ConfigError
  // naming `what` when total does not divide.
  static ShardLayout even(int64_t total, int world, const std::string& what);

  int64_t whole() const { return whole_; }
  int world_size() const { return static_cast<int>(ranks_.size()); }
  int64_t local_size() const { return local_; }
  const std::vector<RowRange>& ranges(int rank) const { return ranks_.at(static_cast<size_t>(rank)); }
  // The same layout with every position multiplied by `by` (heads -> features).
  ShardLayout scaled(int64_t by) const;

  // How to assemble the whole from the concatenation of every rank's local
  // part (rank 0's first): copy `length` positions from `source` in the
  // concatenation to `target` in the whole. Runs are in target order, cover
  // the whole once, and take a replicated position from its lowest rank.
  struct Run {
    int64_t source, target, length;
  };
  const std::vector<Run>& assembly() const { return assembly_; }
  // True when the concatenation already is the whole (the plain even split).
  bool concatenation_is_whole() const { return assembly_.size() == 1 && assembly_[0].source == 0; }

 private:
  int64_t whole_ = 0;
  int64_t local_ = 0;
  std::vector<std::vector<RowRange>> ranks_;
  std::vector<Run> assembly_;
};

// Splits [0, total) into world_size equal ranges and returns rank's. Throws
// nnsight::ConfigError naming `what` when total does not divide.
RowRange even_split(int64_t total, int world, int rank, const std::string& what);
RowRange even_split(int64_t total, const ParallelContext& ctx, const std::string& what);

}  // namespace nnsight::tp
