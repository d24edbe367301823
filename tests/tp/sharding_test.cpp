// Gather / re-shard rules and the parallel layers, over real gloo groups of
// thread ranks. The reference is always the whole tensor (or the unsharded
// layer) computed directly in the test.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "support/thread_ranks.h"
#include "tp/parallel_embedding.h"
#include "tp/parallel_linear.h"
#include "tp/sharding.h"

namespace nnsight {
namespace {

using tp::RowRange;
using tp::ShardLayout;

at::Tensor whole_value(int64_t rows, int64_t cols) {
  return at::arange(rows * cols, at::kFloat).reshape({rows, cols}) * 0.5 - 3;
}

// This rank's part of `whole` under `layout`, built by hand.
at::Tensor part_of(const at::Tensor& whole, const ShardLayout& layout, int rank) {
  std::vector<at::Tensor> parts;
  for (const auto& r : layout.ranges(rank)) parts.push_back(whole.narrow(-1, r.start, r.length));
  return at::cat(parts, -1);
}

void check_last_dim(tp::ParallelContext& ctx, const ShardLayout& layout) {
  const at::Tensor whole = whole_value(5, layout.whole());
  const at::Tensor local = part_of(whole, layout, ctx.rank());
  tp::LastDimSharding s(ctx, layout);
  at::Tensor g = s.gather(local);
  EXPECT_TRUE(at::equal(g, whole)) << s.describe();
  EXPECT_TRUE(at::equal(s.reshard(whole), local));
  // An edit of the whole lands in the parts of the ranks that hold it.
  at::Tensor edited = whole.clone();
  edited.narrow(-1, 1, 2).zero_();
  EXPECT_TRUE(at::equal(s.gather(s.reshard(edited)), edited));
}

TEST(Sharding, EvenSplitOverThreeRanks) {
  testing::run_ranks(3, [](tp::ParallelContext& ctx) { check_last_dim(ctx, ShardLayout::even(12, 3, "x")); });
}

TEST(Sharding, FusedQkvOverTwoRanks) {
  const int64_t hidden = 8;
  const ShardLayout qkv = ShardLayout::from(3 * hidden, 2, [&](int r) {
    std::vector<RowRange> rows;
    for (int64_t part = 0; part < 3; ++part) rows.push_back({part * hidden + r * hidden / 2, hidden / 2});
    return rows;
  });
  testing::run_ranks(2, [&](tp::ParallelContext& ctx) { check_last_dim(ctx, qkv); });
}

TEST(Sharding, ReplicatedKvHeadsOverFourRanksGatherWithoutDuplicates) {
  const ShardLayout kv = ShardLayout::from(2, 4, [](int r) { return std::vector<RowRange>{{r / 2, 1}}; }).scaled(3);
  testing::run_ranks(4, [&](tp::ParallelContext& ctx) {
    check_last_dim(ctx, kv);
    EXPECT_EQ(tp::LastDimSharding(ctx, kv).gather(at::zeros({2, 3})).sizes(), (std::vector<int64_t>{2, 6}));
  });
}

TEST(Sharding, PartialSumGathersTheSumAndReshardsByWorldSize) {
  testing::run_ranks(3, [](tp::ParallelContext& ctx) {
    const at::Tensor whole = whole_value(2, 4);
    // Uneven parts that sum to the whole: rank 0 holds whole - 2, the others 1 each.
    const at::Tensor local = ctx.rank() == 0 ? whole - 2 : at::ones_like(whole);
    tp::PartialSumSharding s(ctx);
    EXPECT_TRUE(at::allclose(s.gather(local), whole));
    EXPECT_TRUE(at::allclose(s.reshard(whole), whole / 3));
    EXPECT_TRUE(at::allclose(s.gather(s.reshard(whole * 2)), whole * 2));
  });
}

TEST(ParallelLayers, ColumnAndRowParallelEqualTheUnshardedLinear) {
  const at::Tensor x = at::randn({4, 6}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor w1 = at::randn({9, 6}), b1 = at::randn({9});
  const at::Tensor w2 = at::randn({5, 9}), b2 = at::randn({5});
  const at::Tensor h = at::linear(x, w1, b1);
  const at::Tensor y = at::linear(h, w2, b2);
  testing::run_ranks(3, [&](tp::ParallelContext& ctx) {
    const ShardLayout cols = ShardLayout::even(9, 3, "features");
    const RowRange mine = cols.ranges(ctx.rank()).front();
    tp::ColumnParallelLinear up(6, true, ctx, cols, false, at::kFloat);
    up.weight.copy_(w1.narrow(0, mine.start, mine.length));
    up.bias.copy_(b1.narrow(0, mine.start, mine.length));
    tp::ColumnParallelLinear gathered(6, true, ctx, cols, true, at::kFloat);
    gathered.weight.copy_(up.weight);
    gathered.bias.copy_(up.bias);
    tp::RowParallelLinear down(5, true, ctx, cols, at::kFloat);
    down.weight.copy_(w2.narrow(1, mine.start, mine.length));
    down.bias.copy_(b2);
    at::Tensor local_h = up.forward(x);  // [4, 3]
    EXPECT_TRUE(at::allclose(local_h, h.narrow(1, mine.start, mine.length), 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(gathered.forward(x), h, 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(down.forward(local_h), y, 1e-4, 1e-4));
    // What hooks see: the column output and the row input are split, the rest whole.
    ASSERT_NE(up.output_sharding(), nullptr);
    EXPECT_TRUE(at::allclose(up.output_sharding()->gather(local_h), h, 1e-5, 1e-5));
    EXPECT_EQ(gathered.output_sharding(), nullptr);
    ASSERT_NE(down.input_sharding(), nullptr);
    EXPECT_EQ(down.output_sharding(), nullptr);
    EXPECT_EQ(up.input_sharding(), nullptr);
  });
}

TEST(ParallelLayers, VocabParallelEmbeddingAndHeadEqualTheWholeTable) {
  const at::Tensor table = at::randn({12, 4});
  const at::Tensor ids = at::tensor(std::vector<int64_t>{0, 11, 5, 4, 7, 3}, at::kLong);
  const at::Tensor hidden = at::randn({2, 4});
  testing::run_ranks(3, [&](tp::ParallelContext& ctx) {
    tp::VocabParallelEmbedding emb(12, 4, ctx, at::kFloat);
    emb.weight.copy_(table.narrow(0, emb.rows().start, emb.rows().length));
    EXPECT_TRUE(at::equal(emb.forward(ids), at::embedding(table, ids)));
    tp::ParallelLMHead head(12, 4, ctx, at::kFloat);
    head.tie_to(emb);
    EXPECT_TRUE(at::allclose(head.forward(hidden), at::matmul(hidden, table.t()), 1e-5, 1e-5));
  });
}

}  // namespace
}  // namespace nnsight
