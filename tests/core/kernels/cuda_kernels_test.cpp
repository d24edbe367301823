// The hand-written CUDA kernels (core/kernels/cuda_kernels.h) against the
// ATen calls they replace and a float64 reference: the residual add and
// RMSNorm, silu(gate) * up (also on the strided halves of a fused gate_up
// output), rotary on q and k (bitwise the ATen path's rounding), and decode
// attention over the paged cache (GQA, sliding window, softcap, head
// dimensions that are not multiples of 32, blocks out of order), which must
// also give a sequence's row bitwise the same alone or batched, and in a
// decode step or beside prefills. They need a
// GPU and a build with the kernels: elsewhere each test skips and says why;
// one test checks what a build without them does.
#include "core/kernels/cuda_kernels.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "batching/flattener.h"
#include "core/kernels/paged_attention.h"
#include "core/kernels/rms_norm.h"
#include "core/kernels/rotary.h"
#include "core/kernels/silu.h"
#include "core/kv_cache.h"
#include "support/gpu_available.h"
#include "support/seq_slots.h"

namespace nnsight {
namespace {

#define SKIP_WITHOUT_KERNELS() \
  if (auto why = testing::why_no_cuda_kernels(); !why.empty()) GTEST_SKIP() << "CUDA kernel test skipped: " << why

double tolerance(at::ScalarType t) { return t == at::kFloat ? 1e-5 : t == at::kHalf ? 2e-3 : 1e-2; }

const at::ScalarType kTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

TEST(CudaKernels, WithoutThemEveryCallerKeepsItsAtenPath) {
  const at::Tensor x = at::randn({2, 8});
  EXPECT_FALSE(kernels::cuda_kernels_for(x)) << "a CPU tensor never takes the CUDA kernels";
  if (kernels::cuda_kernels_built()) GTEST_SKIP() << "this build has the CUDA kernels: the tests below cover them";
  EXPECT_THROW(kernels::cuda::rms_norm(x, at::ones({8}), 1e-6), c10::Error);
}

TEST(CudaKernels, AddRmsNormEqualsTheAtenPath) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(1);
  for (at::ScalarType type : kTypes) {
    for (int64_t rows : {1, 7, 33}) {
      for (int64_t hidden : {64, 576, 4099}) {
        const auto opts = at::TensorOptions().dtype(type).device(at::kCUDA);
        const at::Tensor a = at::randn({rows, hidden}, opts), b = at::randn({rows, hidden}, opts);
        const at::Tensor w = at::rand({hidden}, opts) + 0.5;
        ASSERT_TRUE(kernels::cuda_kernels_for(a));
        const auto [sum, out] = kernels::add_rms_norm(a, b, w, 1e-5);
        const at::Tensor normed = kernels::rms_norm(a, w, 1e-5);
        kernels::UseCudaKernels off(false);
        ASSERT_FALSE(kernels::cuda_kernels_for(a));
        const auto [sum_ref, out_ref] = kernels::add_rms_norm(a, b, w, 1e-5);
        const std::string where =
            std::string(c10::toString(type)) + " " + std::to_string(rows) + "x" + std::to_string(hidden);
        EXPECT_TRUE(at::equal(sum, sum_ref)) << "the residual sum is one rounded add: " << where;
        EXPECT_LE(testing::relative_error(out, out_ref), tolerance(type)) << where;
        EXPECT_LE(testing::relative_error(normed, kernels::rms_norm(a, w, 1e-5)), tolerance(type)) << where;
        // float64 reference, Hugging Face's order.
        const at::Tensor s64 = sum_ref.to(at::kDouble);
        const at::Tensor ref =
            w.to(at::kDouble) * (s64 * at::rsqrt(s64.pow(2).mean(-1, true) + 1e-5)).to(type).to(at::kDouble);
        EXPECT_LE(testing::relative_error(out, ref), tolerance(type)) << where;
      }
    }
  }
}

TEST(CudaKernels, SiluMulEqualsTheAtenPathOnContiguousAndFusedHalves) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(2);
  for (at::ScalarType type : kTypes) {
    const auto opts = at::TensorOptions().dtype(type).device(at::kCUDA);
    for (int64_t rows : {1, 5, 64}) {
      const int64_t n = 1536 + 3;
      const at::Tensor fused = at::randn({rows, 2 * n}, opts) * 3;
      const at::Tensor gate = fused.narrow(1, 0, n), up = fused.narrow(1, n, n);  // strided rows
      const at::Tensor gate_c = gate.contiguous(), up_c = up.contiguous();
      const at::Tensor a = kernels::silu_mul(gate, up), b = kernels::silu_mul(gate_c, up_c);
      const at::Tensor ref = at::silu(gate_c) * up_c;
      EXPECT_TRUE(at::equal(a, b)) << "strided and contiguous inputs give the same bits";
      EXPECT_LE(testing::relative_error(a, ref), tolerance(type)) << c10::toString(type) << " rows " << rows;
      const at::Tensor g64 = gate_c.to(at::kDouble);
      EXPECT_LE(testing::relative_error(a, (g64 / (1 + at::exp(-g64))).to(type).to(at::kDouble) * up_c.to(at::kDouble)),
                tolerance(type));
    }
  }
}

TEST(CudaKernels, RotaryOnQAndKIsTheAtenPathBitwise) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(3);
  for (at::ScalarType type : kTypes) {
    for (int64_t rot : {64, 32}) {  // whole heads, and a partial rotary dimension
      const kernels::RotaryEmbedding rope(rot, 4096, 10000.0, RopeScaling{});
      const auto opts = at::TensorOptions().dtype(type).device(at::kCUDA);
      const int64_t tokens = 37;
      const at::Tensor q = at::randn({tokens, 9, 64}, opts), k = at::randn({tokens, 3, 64}, opts);
      const at::Tensor positions =
          at::randint(0, 4096, {tokens}, at::TensorOptions().dtype(at::kLong).device(at::kCUDA));
      at::Tensor qf = q.clone(), kf = k.clone();
      rope.apply_qk_(qf, kf, positions);
      at::Tensor qa = q.clone(), ka = k.clone();
      {
        kernels::UseCudaKernels off(false);
        rope.apply_qk_(qa, ka, positions);
      }
      EXPECT_FALSE(at::equal(qf, q)) << "q was rotated";
      EXPECT_TRUE(at::equal(qf, qa)) << c10::toString(type) << " rot " << rot << ": max diff "
                                     << (qf.to(at::kFloat) - qa.to(at::kFloat)).abs().max().item<float>();
      EXPECT_TRUE(at::equal(kf, ka)) << c10::toString(type) << " rot " << rot;
    }
  }
}

std::vector<int32_t> shuffled_blocks(int64_t count, int64_t first) {
  std::vector<int32_t> b(static_cast<size_t>(count));
  std::iota(b.begin(), b.end(), static_cast<int32_t>(first));
  std::reverse(b.begin(), b.end());
  return b;
}

TEST(CudaKernels, DecodeAttentionEqualsTheGenericPath) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(4);
  constexpr int64_t kBlock = 16;
  // Decodes after 0, 4, 16, 63 and 299 cached keys (1 to 300 keys each).
  const std::vector<int64_t> cached = {0, 4, 16, 63, 299};
  std::vector<batching::SeqSlot> slots;
  int64_t next_block = 0;
  for (int64_t c : cached) {
    const int64_t blocks = (c + 1 + kBlock - 1) / kBlock;
    slots.push_back(testing::seq_slot(c, 1, shuffled_blocks(blocks, next_block)));
    next_block += blocks;
  }
  const auto meta_cpu = batching::flatten_slots(slots, kBlock).meta;
  const auto meta = meta_cpu.to(at::Device(at::kCUDA));
  for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 4}, {6, 2}, {5, 1}}) {
      for (int64_t d : {64, 80, 128}) {
        const auto opts = at::TensorOptions().dtype(type).device(at::kCUDA);
        KVCache cache = KVCache::allocate(next_block, kBlock, kv_heads, d, opts);
        cache.key.normal_();
        cache.value.normal_();
        const at::Tensor q = at::randn({meta.num_tokens, heads, d}, opts);
        ASSERT_TRUE(kernels::cuda::decode_attention_applies(q, cache, meta));
        for (kernels::AttentionOptions o : {kernels::AttentionOptions{}, kernels::AttentionOptions{20, 0.0},
                                            kernels::AttentionOptions{0, 1.5}, kernels::AttentionOptions{7, 3.0}}) {
          const double scale = 1.0 / std::sqrt(static_cast<double>(d));
          const at::Tensor fused = kernels::paged_attention(q, cache, meta, scale, o);
          const at::Tensor generic = kernels::paged_attention_generic(q, cache, meta, scale, o);
          // The CPU kernel in float32 on the same values: an independent reference.
          KVCache cpu_cache{cache.key.to(at::kCPU).to(at::kFloat), cache.value.to(at::kCPU).to(at::kFloat)};
          const at::Tensor cpu = kernels::paged_attention(q.to(at::kCPU).to(at::kFloat), cpu_cache, meta_cpu, scale, o);
          const std::string where = std::string(c10::toString(type)) + " heads " + std::to_string(heads) + "/" +
                                    std::to_string(kv_heads) + " d " + std::to_string(d) + " window " +
                                    std::to_string(o.sliding_window) + " softcap " + std::to_string(o.logit_softcap);
          ASSERT_EQ(fused.sizes(), q.sizes());
          EXPECT_LE(testing::relative_error(fused, generic), tolerance(type)) << where;
          EXPECT_LE(testing::relative_error(fused, cpu), type == at::kFloat ? 1e-5 : 1e-2) << where;
        }
      }
    }
  }
}

TEST(CudaKernels, DecodeAttentionRowsAreTheSameAloneOrBatched) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(5);
  constexpr int64_t kBlock = 16;
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  KVCache cache = KVCache::allocate(41, kBlock, 2, 128, opts);
  cache.key.normal_();
  cache.value.normal_();
  const auto alone = batching::flatten_slots({testing::seq_slot(200, 1, shuffled_blocks(13, 0))}, kBlock)
                         .meta.to(at::Device(at::kCUDA));
  const auto batched = batching::flatten_slots({testing::seq_slot(30, 1, shuffled_blocks(2, 39)),
                                                testing::seq_slot(200, 1, shuffled_blocks(13, 0)),
                                                testing::seq_slot(400, 1, shuffled_blocks(26, 13))},
                                               kBlock)
                           .meta.to(at::Device(at::kCUDA));
  const at::Tensor q = at::randn({3, 8, 128}, opts);
  const at::Tensor one = kernels::paged_attention(q.narrow(0, 1, 1), cache, alone, 0.1);
  const at::Tensor many = kernels::paged_attention(q, cache, batched, 0.1);
  EXPECT_TRUE(at::equal(one[0], many[1]));
}

// An overflowed key (inf in half precision) makes its sequence's rows NaN,
// as the ATen softmax does, not a softmax over the other keys; the other
// sequences are untouched. The predicate refuses a cache of another head size.
TEST(CudaKernels, DecodeAttentionPropagatesAnOverflowedKeyAsNaN) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(6);
  constexpr int64_t kBlock = 16;
  const auto opts = at::TensorOptions().dtype(at::kHalf).device(at::kCUDA);
  KVCache cache = KVCache::allocate(4, kBlock, 2, 64, opts);
  cache.key.normal_();
  cache.value.normal_();
  const auto meta =
      batching::flatten_slots(
          {testing::seq_slot(7, 1, std::vector<int32_t>{0}), testing::seq_slot(7, 1, std::vector<int32_t>{1})}, kBlock)
          .meta.to(at::Device(at::kCUDA));
  cache.key[0][5].fill_(std::numeric_limits<float>::infinity());  // sequence 0's key 5 (a warp's second key)
  const at::Tensor q = at::randn({2, 4, 64}, opts);
  const at::Tensor fused = kernels::paged_attention(q, cache, meta, 0.125);
  const at::Tensor generic = kernels::paged_attention_generic(q, cache, meta, 0.125, kernels::AttentionOptions{});
  EXPECT_TRUE(at::isnan(generic[0].to(at::kFloat)).all().item<bool>()) << "the reference's behaviour";
  EXPECT_TRUE(at::isnan(fused[0].to(at::kFloat)).all().item<bool>());
  EXPECT_FALSE(at::isnan(fused[1].to(at::kFloat)).any().item<bool>());
  EXPECT_LE(testing::relative_error(fused[1], generic[1]), tolerance(at::kHalf));
  KVCache wider = KVCache::allocate(4, kBlock, 2, 80, opts);
  EXPECT_FALSE(kernels::cuda::decode_attention_applies(q, wider, meta));
}

// Which steps have decodes beside prefills, from the host copies (on the CPU).
TEST(CudaKernels, MixedStepsAreDecodesBesidePrefills) {
  const auto meta_of = [](const std::vector<std::pair<int64_t, int64_t>>& shapes) {
    std::vector<batching::SeqSlot> slots;
    int32_t block = 0;
    for (const auto& [cached, fresh] : shapes) {
      std::vector<int32_t> table;
      for (int64_t b = 0; b < (cached + fresh + 15) / 16; ++b) table.push_back(block++);
      slots.push_back(testing::seq_slot(cached, fresh, table));
    }
    return batching::flatten_slots(slots, 16).meta;
  };
  EXPECT_TRUE(kernels::cuda::mixes_decodes_and_prefills(meta_of({{0, 9}, {13, 1}, {6, 5}})));
  EXPECT_TRUE(kernels::cuda::mixes_decodes_and_prefills(meta_of({{30, 1}, {0, 2}})));
  EXPECT_FALSE(kernels::cuda::mixes_decodes_and_prefills(meta_of({{4, 1}, {30, 1}}))) << "a decode step";
  EXPECT_FALSE(kernels::cuda::mixes_decodes_and_prefills(meta_of({{0, 4}, {8, 3}}))) << "prefills only";
  EXPECT_FALSE(kernels::cuda::mixes_decodes_and_prefills(meta_of({{0, 1}}))) << "one sequence";
}

// A decoding sequence beside prefills (the flash path in bf16, the padded
// path in float32, both with other arithmetic than the decode kernel): its
// row is bitwise the row the decode kernel gives it in a decode step, so its
// tokens do not depend on whether a companion was prefilling. The prefill
// rows are the flash / padded path's, untouched.
TEST(CudaKernels, ADecodeBesidePrefillsIsBitwiseTheDecodeSteps) {
  SKIP_WITHOUT_KERNELS();
  at::manual_seed(8);
  constexpr int64_t kBlock = 16;
  // (cached, new): decodes after 13, 0, 299 and 40 cached keys beside prefills.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{0, 9},   {13, 1},  {6, 20}, {0, 1},
                                                           {299, 1}, {21, 12}, {40, 1}};
  std::vector<batching::SeqSlot> slots;
  int64_t next_block = 0;
  for (const auto& [cached, fresh] : shapes) {
    const int64_t blocks = (cached + fresh + kBlock - 1) / kBlock;
    slots.push_back(testing::seq_slot(cached, fresh, shuffled_blocks(blocks, next_block)));
    next_block += blocks;
  }
  const auto meta = batching::flatten_slots(slots, kBlock).meta.to(at::Device(at::kCUDA));
  for (at::ScalarType type : {at::kBFloat16, at::kFloat}) {
    for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{8, 2}, {4, 4}}) {
      const int64_t d = 128;
      const auto opts = at::TensorOptions().dtype(type).device(at::kCUDA);
      KVCache cache = KVCache::allocate(next_block, kBlock, kv_heads, d, opts);
      cache.key.normal_();
      cache.value.normal_();
      const at::Tensor q = at::randn({meta.num_tokens, heads, d}, opts);
      for (kernels::AttentionOptions o : {kernels::AttentionOptions{}, kernels::AttentionOptions{20, 0.0}}) {
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const std::string where = std::string(c10::toString(type)) + " heads " + std::to_string(heads) + "/" +
                                  std::to_string(kv_heads) + " window " + std::to_string(o.sliding_window);
        const at::Tensor mixed = kernels::paged_attention(q, cache, meta, scale, o);
        const at::Tensor generic = kernels::paged_attention_generic(q, cache, meta, scale, o);
        EXPECT_LE(testing::relative_error(mixed, generic), tolerance(type)) << where;
        // Each decode in a decode step of its own, and all of them in one.
        std::vector<batching::SeqSlot> decodes;
        for (size_t s = 0; s < shapes.size(); ++s)
          if (shapes[s].second == 1) decodes.push_back(slots[s]);
        const auto decode_meta = batching::flatten_slots(decodes, kBlock).meta.to(at::Device(at::kCUDA));
        std::vector<int64_t> rows;  // the decodes' rows in the mixed step
        for (size_t s = 0, row = 0; s < shapes.size(); row += static_cast<size_t>(shapes[s].second), ++s)
          if (shapes[s].second == 1) rows.push_back(static_cast<int64_t>(row));
        ASSERT_EQ(rows, (std::vector<int64_t>{9, 30, 31, 44}));
        const at::Tensor decode_q = q.index_select(0, at::tensor(rows, at::kLong).to(at::kCUDA));
        ASSERT_TRUE(kernels::cuda::decode_attention_applies(decode_q, cache, decode_meta));
        const at::Tensor decode_step = kernels::paged_attention(decode_q, cache, decode_meta, scale, o);
        for (size_t i = 0; i < rows.size(); ++i)
          EXPECT_TRUE(at::equal(mixed[rows[i]], decode_step[static_cast<int64_t>(i)]))
              << where << ": the decode at row " << rows[i] << " differs from its decode step's";
        // With the kernels off the same step is the flash / padded path's, whose
        // prefill rows the kernels leave as they are; the rewrite of its decode
        // rows gives the kernels' step.
        at::Tensor plain;
        {
          kernels::UseCudaKernels off(false);
          plain = kernels::paged_attention(q, cache, meta, scale, o);
        }
        for (int64_t r = 0; r < meta.num_tokens; ++r) {
          if (std::find(rows.begin(), rows.end(), r) != rows.end()) continue;
          EXPECT_TRUE(at::equal(mixed[r], plain[r])) << where << ": prefill row " << r;
        }
        at::Tensor redone = plain.clone();
        EXPECT_TRUE(kernels::cuda::redo_one_row_sequences(q, cache, meta, scale, o, redone)) << where;
        EXPECT_TRUE(at::equal(redone, mixed)) << where;
      }
    }
  }
}

}  // namespace
}  // namespace nnsight
