// A sequence's logits through the model forward are bitwise the same whether
// it runs alone or in a flat batch with other sequences (at other rows, with
// other prompt lengths, one of them chunked): the linear layers, norms and
// attention reduce each row in an order that does not depend on the batch.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/paged_stepper.h"
#include "core/kv_cache.h"
#include "models/causal_lm.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

void check_alone_equals_batched(const ModelConfig& cfg, at::ScalarType dtype, uint64_t seed) {
  at::NoGradGuard no_grad;
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(dtype));
  testing::randomize(*model, seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> tok(0, cfg.vocab_size - 1);
  auto draw = [&](int64_t n) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(tok(rng));
    return v;
  };
  // Sequence 0 is the one watched: a 7-token prompt, then three decode tokens.
  const std::vector<std::vector<int64_t>> watched = {draw(7), draw(1), draw(1), draw(1)};

  // Alone.
  std::vector<at::Tensor> alone;
  {
    testing::PagedStepper s(*model, 1, 4, 64);
    for (const auto& t : watched) alone.push_back(s.step({t}, {0})[0]);
  }
  // Not vacuous: the logits change from step to step.
  ASSERT_FALSE(testing::bitwise_equal(alone[0], alone[1]));

  // In a batch: sequence 1 has a 12-token prompt computed in chunks of 5 and
  // 7 and sits before sequence 0 in the flat batch; sequence 2 joins at step
  // 1 with a 3-token prompt; all then decode together (9 to 15 rows a step).
  testing::PagedStepper s(*model, 3, 4, 64);
  const std::vector<int64_t> p1 = draw(12);
  const std::vector<std::vector<std::vector<int64_t>>> plan = {
      {watched[0], std::vector<int64_t>(p1.begin(), p1.begin() + 5), {}},
      {watched[1], std::vector<int64_t>(p1.begin() + 5, p1.end()), draw(3)},
      {watched[2], draw(1), draw(1)},
      {watched[3], draw(1), draw(1)},
  };
  for (size_t st = 0; st < plan.size(); ++st) {
    auto got = s.step(plan[st], {1, 0, 2});
    EXPECT_TRUE(testing::bitwise_equal(got[0], alone[st]))
        << cfg.name << " " << c10::toString(dtype) << " step " << st << ": max difference "
        << (got[0].to(at::kDouble) - alone[st].to(at::kDouble)).abs().max().item<double>();
    // Not vacuous: a neighbour's logits differ from the watched sequence's.
    EXPECT_FALSE(testing::bitwise_equal(got[1], got[0]));
  }
}

// Wider than the tiny test model, with sizes off the vector widths: a BLAS
// matmul picks different kernels (and sums differently) for different row
// counts at these sizes, so this is a case where batching could show.
// The FFN width stays a multiple of 16: at::silu computes the last
// (numel mod vector width) elements of a buffer with scalar code that can
// differ in the last bit from its vectorized body, so with other widths an
// activation would depend on the number of rows (outside the kernels here).
ModelConfig wider_llama(bool tied) {
  ModelConfig c = testing::tiny_llama_config(tied);
  c.hidden_size = 100;
  c.num_heads = 5;
  c.num_kv_heads = 1;
  c.head_dim = 20;
  c.intermediate_size = 272;
  c.vocab_size = 501;
  return c;
}

TEST(BatchInvariantLogits, LlamaFloat32) { check_alone_equals_batched(wider_llama(false), at::kFloat, 11); }
TEST(BatchInvariantLogits, LlamaTiedFloat32) { check_alone_equals_batched(wider_llama(true), at::kFloat, 12); }
TEST(BatchInvariantLogits, LlamaBFloat16) { check_alone_equals_batched(wider_llama(false), at::kBFloat16, 13); }
TEST(BatchInvariantLogits, TinyLlamaFloat32) {
  check_alone_equals_batched(testing::tiny_llama_config(false), at::kFloat, 14);
}
TEST(BatchInvariantLogits, Gpt2Float32) { check_alone_equals_batched(testing::tiny_gpt2_config(), at::kFloat, 15); }

}  // namespace
}  // namespace nnsight
