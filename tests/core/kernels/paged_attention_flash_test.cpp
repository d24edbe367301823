// The varlen flash path for prefill and mixed steps on CUDA
// (core/kernels/paged_attention_flash.h): its gather of each sequence's
// context from the paged cache, against a plain loop over the block tables
// (on the CPU, here); and on a GPU the attention itself against the
// per-sequence reference (paged_attention_generic) on steps mixing fresh
// prefills, prefills after a cached prefix and decodes, with grouped-query
// heads and a sliding window.
#include "core/kernels/paged_attention_flash.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "batching/flattener.h"
#include "core/kernels/paged_attention.h"
#include "support/gpu_available.h"
#include "support/seq_slots.h"

namespace nnsight {
namespace {

constexpr int64_t kBlock = 4;

// Sequences with (cached, new) tokens, their blocks handed out in reverse
// order from a pool, so that no table is in cache order.
std::vector<batching::SeqSlot> mixed_step(int64_t& blocks_used) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{0, 9}, {13, 1}, {6, 5}, {0, 1}, {30, 1}, {21, 12}};
  std::vector<batching::SeqSlot> slots;
  blocks_used = 0;
  for (const auto& [cached, fresh] : shapes) {
    const int64_t n = (cached + fresh + kBlock - 1) / kBlock;
    std::vector<int32_t> table;
    for (int64_t b = 0; b < n; ++b) table.push_back(static_cast<int32_t>(blocks_used + n - 1 - b));
    blocks_used += n;
    slots.push_back(testing::seq_slot(cached, fresh, table));
  }
  return slots;
}

TEST(FlashAttention, GatherContextIsEachSequencesKeysInOrder) {
  int64_t blocks = 0;
  const std::vector<batching::SeqSlot> slots = mixed_step(blocks);
  const batching::BatchMeta meta = batching::flatten_slots(slots, kBlock).meta;
  const KVCache cache{at::randn({blocks + 2, kBlock, 2, 8}), at::randn({blocks + 2, kBlock, 2, 8})};
  const auto [k, v, cu] = kernels::gather_context(cache, meta);
  std::vector<at::Tensor> want_k, want_v;
  std::vector<int32_t> want_cu = {0};
  for (const auto& s : slots) {
    const int64_t ctx = s.num_computed + static_cast<int64_t>(s.token_ids.size());
    for (int64_t j = 0; j < ctx; ++j) {
      const int64_t block = s.block_table[static_cast<size_t>(j / kBlock)];
      want_k.push_back(cache.key[block][j % kBlock]);
      want_v.push_back(cache.value[block][j % kBlock]);
    }
    want_cu.push_back(want_cu.back() + static_cast<int32_t>(ctx));
  }
  EXPECT_TRUE(at::equal(k, at::stack(want_k)));
  EXPECT_TRUE(at::equal(v, at::stack(want_v)));
  EXPECT_TRUE(at::equal(cu, at::tensor(want_cu, at::kInt)));
}

TEST(FlashAttention, AppliesOnlyToHalfPrecisionOnCudaWithoutSoftcap) {
  int64_t blocks = 0;
  const batching::BatchMeta meta = batching::flatten_slots(mixed_step(blocks), kBlock).meta;
  const auto bf16 = at::TensorOptions().dtype(at::kBFloat16);
  const KVCache cache{at::zeros({blocks, kBlock, 2, 64}, bf16), at::zeros({blocks, kBlock, 2, 64}, bf16)};
  EXPECT_FALSE(kernels::flash_attention_applies(at::zeros({meta.num_tokens, 4, 64}, bf16), cache, meta, {}))
      << "a CPU tensor";
}

TEST(FlashAttention, MixedStepsEqualTheGenericPathOnAGpu) {
  if (auto why = testing::why_no_gpu(); !why.empty()) GTEST_SKIP() << "flash attention test skipped: " << why;
  at::manual_seed(7);
  int64_t blocks = 0;
  const std::vector<batching::SeqSlot> slots = mixed_step(blocks);
  const batching::BatchMeta meta = batching::flatten_slots(slots, kBlock).meta.to(at::Device(at::kCUDA));
  for (at::ScalarType type : {at::kBFloat16, at::kHalf}) {
    for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 4}, {6, 2}, {5, 1}}) {
      for (int64_t d : {64, 80, 128}) {
        const auto opts = at::TensorOptions().dtype(type).device(at::kCUDA);
        KVCache cache{at::randn({blocks, kBlock, kv_heads, d}, opts), at::randn({blocks, kBlock, kv_heads, d}, opts)};
        const at::Tensor q = at::randn({meta.num_tokens, heads, d}, opts);
        for (int64_t window : {0, 5}) {
          const kernels::AttentionOptions o{window, 0.0};
          const double scale = 1.0 / std::sqrt(static_cast<double>(d));
          ASSERT_TRUE(kernels::flash_attention_applies(q, cache, meta, o));
          const int64_t calls = kernels::flash_attention_calls();
          const at::Tensor flash = kernels::paged_attention(q, cache, meta, scale, o);
          EXPECT_EQ(kernels::flash_attention_calls(), calls + 1) << "paged_attention took the flash path";
          const at::Tensor generic = kernels::paged_attention_generic(q, cache, meta, scale, o);
          ASSERT_EQ(flash.sizes(), q.sizes());
          EXPECT_LE(testing::relative_error(flash, generic), type == at::kHalf ? 2e-3 : 1e-2)
              << c10::toString(type) << " heads " << heads << "/" << kv_heads << " d " << d << " window " << window;
        }
      }
    }
  }
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  const KVCache cache{at::zeros({blocks, kBlock, 2, 64}, opts), at::zeros({blocks, kBlock, 2, 64}, opts)};
  const at::Tensor q = at::zeros({meta.num_tokens, 4, 64}, opts);
  EXPECT_FALSE(kernels::flash_attention_applies(q, cache, meta, kernels::AttentionOptions{0, 30.0})) << "softcap";
  EXPECT_FALSE(kernels::flash_attention_applies(q.to(at::kFloat), cache, meta, {})) << "float32";
  {
    kernels::UseFlashAttention off(false);
    EXPECT_FALSE(kernels::flash_attention_applies(q, cache, meta, {}));
  }
}

// Batch invariance through chunked prefill: how a prompt is cut into chunks
// depends on its companions (the step's token budget), so a query row must
// come out bitwise the same whether its sequence is prefilled whole, in a
// later chunk after a cached prefix, or beside another prefill and decodes.
TEST(FlashAttention, ARowsBitsDoNotDependOnHowItsPrefillIsChunked) {
  if (auto why = testing::why_no_gpu(); !why.empty()) GTEST_SKIP() << "flash attention test skipped: " << why;
  at::manual_seed(9);
  constexpr int64_t kLen = 300, kBs = 16;
  const int64_t blocks = (kLen + kBs - 1) / kBs;
  std::vector<int32_t> table;
  for (int64_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>(blocks - 1 - b));
  std::vector<int32_t> other_table;
  for (int64_t b = 0; b < 4; ++b) other_table.push_back(static_cast<int32_t>(blocks + b));
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  KVCache cache{at::randn({blocks + 4, kBs, 2, 128}, opts), at::randn({blocks + 4, kBs, 2, 128}, opts)};
  const at::Tensor q = at::randn({kLen, 8, 128}, opts);  // the sequence's queries, positions 0 .. 299
  const double scale = 1.0 / std::sqrt(128.0);
  for (int64_t window : {0, 40}) {
    const kernels::AttentionOptions o{window, 0.0};
    const auto meta_of = [&](const std::vector<batching::SeqSlot>& slots) {
      return batching::flatten_slots(slots, kBs).meta.to(at::Device(at::kCUDA));
    };
    const at::Tensor whole = kernels::paged_attention(q, cache, meta_of({testing::seq_slot(0, kLen, table)}), scale, o);
    // Positions 200 .. 299 as a second chunk, alone and beside a 37-token prefill.
    const at::Tensor tail = q.narrow(0, 200, 100);
    const at::Tensor alone =
        kernels::paged_attention(tail, cache, meta_of({testing::seq_slot(200, 100, table)}), scale, o);
    const at::Tensor other = at::randn({37, 8, 128}, opts);
    const at::Tensor beside =
        kernels::paged_attention(at::cat({other, tail}), cache,
                                 meta_of({testing::seq_slot(0, 37, other_table), testing::seq_slot(200, 100, table)}),
                                 scale, o)
            .narrow(0, 37, 100);
    const at::Tensor want = whole.narrow(0, 200, 100);
    EXPECT_LE(testing::relative_error(alone, want), 1e-2) << "window " << window;
    EXPECT_TRUE(at::equal(alone, want)) << "window " << window << ": a later chunk differs from the whole prefill by "
                                        << (alone.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>();
    EXPECT_TRUE(at::equal(beside, alone)) << "window " << window << ": beside another prefill";
  }
}

}  // namespace
}  // namespace nnsight
