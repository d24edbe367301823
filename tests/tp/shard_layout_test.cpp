// ShardLayout: even splits, the messages for splits that do not divide, and
// the assembly runs that put gathered parts back in the unsharded order
// (fused [q|k|v] rows, replicated KV heads), checked against placements
// worked out by hand.
#include <gtest/gtest.h>

#include <nnsight/error.hpp>

#include "tp/shard_layout.h"

namespace nnsight {
namespace {

using tp::RowRange;
using tp::ShardLayout;

std::vector<std::tuple<int64_t, int64_t, int64_t>> runs(const ShardLayout& l) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out;
  for (const auto& r : l.assembly()) out.emplace_back(r.source, r.target, r.length);
  return out;
}

TEST(ShardLayout, EvenSplitIsOneRunAndEachRankHoldsItsSlice) {
  ShardLayout l = ShardLayout::even(1536, 3, "intermediate (MLP) size");
  EXPECT_EQ(l.local_size(), 512);
  EXPECT_EQ(l.ranges(2).front().start, 1024);
  EXPECT_EQ(l.ranges(2).front().length, 512);
  EXPECT_TRUE(l.concatenation_is_whole());
  EXPECT_EQ(runs(l), (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 1536}}));
}

TEST(ShardLayout, SplitThatDoesNotDivideNamesTheCounts) {
  try {
    ShardLayout::even(9, 2, "number of attention heads");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "number of attention heads (9) is not divisible by the tensor-parallel size (2)");
  }
  EXPECT_THROW(tp::even_split(97, 4, 0, "vocabulary size"), ConfigError);
}

TEST(ShardLayout, FusedQkvComesBackInUnshardedOrder) {
  // hidden 4, 2 ranks, 2 positions of each of q, k, v per rank: rank r holds
  // [q_r | k_r | v_r]; the concatenation is [q0 k0 v0 q1 k1 v1] (2 each).
  const int64_t hidden = 4;
  ShardLayout l = ShardLayout::from(3 * hidden, 2, [&](int r) {
    std::vector<RowRange> rows;
    for (int64_t part = 0; part < 3; ++part) rows.push_back({part * hidden + 2 * r, 2});
    return rows;
  });
  EXPECT_EQ(l.local_size(), 6);
  EXPECT_FALSE(l.concatenation_is_whole());
  // whole: q0 (src 0) q1 (src 6) k0 (src 2) k1 (src 8) v0 (src 4) v1 (src 10)
  EXPECT_EQ(runs(l), (std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                         {0, 0, 2}, {6, 2, 2}, {2, 4, 2}, {8, 6, 2}, {4, 8, 2}, {10, 10, 2}}));
}

TEST(ShardLayout, ReplicatedKvHeadsAreTakenOnceFromTheLowestRank) {
  // 2 KV heads of dim 3 over 4 ranks: ranks 0,1 hold head 0, ranks 2,3 head 1.
  ShardLayout heads = ShardLayout::from(2, 4, [](int r) { return std::vector<RowRange>{{r / 2, 1}}; });
  ShardLayout l = heads.scaled(3);
  EXPECT_EQ(l.whole(), 6);
  EXPECT_EQ(l.local_size(), 3);
  EXPECT_EQ(l.ranges(3).front().start, 3);
  EXPECT_EQ(runs(l), (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 3}, {6, 3, 3}}));
}

TEST(ShardLayout, UncoveredOrUnevenLayoutsAreInternalErrors) {
  EXPECT_THROW(ShardLayout(4, {{RowRange{0, 2}}, {RowRange{0, 2}}}), c10::Error);  // positions 2, 3 uncovered
  EXPECT_THROW(ShardLayout(4, {{RowRange{0, 3}}, {RowRange{3, 1}}}), c10::Error);  // 3 vs 1 per rank
}

}  // namespace
}  // namespace nnsight
