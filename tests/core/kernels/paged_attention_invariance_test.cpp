// Paged attention: a sequence's output rows are bitwise the same whether it
// runs alone or with other sequences in the batch (and whatever the thread count).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <vector>

#include "batching/flattener.h"
#include "support/seq_slots.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"
#include "support/bitwise_equal.h"

namespace nnsight {
namespace {

using testing::bitwise_equal;

void check(at::ScalarType dt, int64_t d) {
  at::manual_seed(11);
  const int64_t heads = 5, kvh = 1, bs = 4;
  KVCache cache = KVCache::allocate(16, bs, kvh, d, dt);
  cache.key.normal_();
  cache.value.normal_();
  // Sequence A: 3 cached tokens + 4 new, in blocks {5, 2}. B and C around it.
  const batching::SeqSlot a = testing::seq_slot(3, 4, {5, 2});
  const batching::SeqSlot b = testing::seq_slot(0, 6, {0, 7}), c = testing::seq_slot(9, 1, {1, 3, 4});
  at::Tensor qa = at::randn({4, heads, d}).to(dt);
  at::Tensor qb = at::randn({6, heads, d}).to(dt), qc = at::randn({1, heads, d}).to(dt);
  const int saved = at::get_num_threads();
  at::set_num_threads(1);
  at::Tensor alone = kernels::paged_attention(qa, cache, batching::flatten_slots({a}, bs).meta, 0.3);
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    at::Tensor q = at::cat({qb, qa, qc}, 0);
    at::Tensor out = kernels::paged_attention(q, cache, batching::flatten_slots({b, a, c}, bs).meta, 0.3);
    EXPECT_TRUE(bitwise_equal(out.narrow(0, 6, 4), alone))
        << c10::toString(dt) << " d=" << d << " threads=" << threads << " max difference "
        << (out.narrow(0, 6, 4).to(at::kDouble) - alone.to(at::kDouble)).abs().max().item<double>();
  }
  at::set_num_threads(saved);
}

TEST(PagedAttention, BitwiseBatchInvariant) {
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16})
    for (int64_t d : {8, 16, 20, 64}) check(dt, d);
}

}  // namespace
}  // namespace nnsight
