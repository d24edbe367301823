// The device path's paged attention (paged_attention_batched.h: the whole
// flat batch in one padded, masked attention) equals the per-sequence
// generic path and the CPU kernel: decodes, a chunk over cached keys and
// prefills in one step, GQA, a sliding window and a softcap; and it reaches
// the engine's layers when the device path is forced on the CPU.
#include "core/kernels/paged_attention_batched.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "batching/flattener.h"
#include "core/kernels/kernel_path.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"
#include "support/seq_slots.h"

namespace nnsight {
namespace {

constexpr int64_t kBlock = 16;

std::vector<int32_t> block_range(int32_t first, int32_t count) {
  std::vector<int32_t> b(static_cast<size_t>(count));
  std::iota(b.begin(), b.end(), first);
  return b;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST(PagedAttentionBatched, EqualsTheGenericPathOnMixedSteps) {
  at::manual_seed(7);
  for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 4}, {6, 2}, {5, 1}}) {
    // Two decodes (after 37 and 130 keys), a 9-row chunk after 50 cached, a
    // 33-row prefill and a one-row prefill, with blocks out of order.
    const std::vector<batching::SeqSlot> slots = {testing::seq_slot(37, 1, {3, 1, 0}),
                                                  testing::seq_slot(130, 1, block_range(20, 9)),
                                                  testing::seq_slot(50, 9, block_range(4, 4)),
                                                  testing::seq_slot(0, 33, {12, 8, 10}), testing::seq_slot(0, 1, {2})};
    const auto meta = batching::flatten_slots(slots, kBlock).meta;
    KVCache cache = KVCache::allocate(29, kBlock, kv_heads, 16, at::kFloat);
    cache.key.normal_();
    cache.value.normal_();
    const at::Tensor q = at::randn({meta.num_tokens, heads, 16});
    for (kernels::AttentionOptions o : {kernels::AttentionOptions{}, kernels::AttentionOptions{20, 0.0},
                                        kernels::AttentionOptions{0, 1.5}, kernels::AttentionOptions{7, 3.0}}) {
      const at::Tensor batched = kernels::paged_attention_batched(q, cache, meta, 0.25, o);
      const at::Tensor generic = kernels::paged_attention_generic(q, cache, meta, 0.25, o);
      const at::Tensor cpu = kernels::paged_attention(q, cache, meta, 0.25, o);
      ASSERT_EQ(batched.sizes(), q.sizes());
      EXPECT_LE(max_diff(batched, generic), 1e-5) << heads << "/" << kv_heads << " window " << o.sliding_window;
      EXPECT_LE(max_diff(batched, cpu), 1e-5) << heads << "/" << kv_heads << " softcap " << o.logit_softcap;
    }
  }
}

TEST(PagedAttentionBatched, IsWhatTheForcedDevicePathRuns) {
  at::manual_seed(8);
  const auto meta =
      batching::flatten_slots({testing::seq_slot(20, 1, {0, 1}), testing::seq_slot(0, 5, {2})}, kBlock).meta;
  KVCache cache = KVCache::allocate(3, kBlock, 2, 8, at::kFloat);
  cache.key.normal_();
  cache.value.normal_();
  const at::Tensor q = at::randn({meta.num_tokens, 4, 8});
  EXPECT_TRUE(kernels::cpu_kernels_for(q));
  {
    kernels::ForceDevicePath device;
    EXPECT_FALSE(kernels::cpu_kernels_for(q));
    EXPECT_TRUE(at::equal(kernels::paged_attention(q, cache, meta, 0.3),
                          kernels::paged_attention_batched(q, cache, meta, 0.3)));
  }
  EXPECT_TRUE(kernels::cpu_kernels_for(q));
}

}  // namespace
}  // namespace nnsight
