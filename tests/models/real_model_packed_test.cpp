// The default model (SmolLM2-135M-Instruct, Q4_1 GGUF with a Q8_0 embedding)
// with its weights kept packed (the engine's default for GGUF files) against
// the same model dequantized to float32 at load: every linear layer, the
// embedding and the tied LM head are packed; logits over a mixed
// prefill/decode batch agree to 1e-4 relative (they are in fact bitwise
// equal: the packed kernel reproduces the float32 kernel's sums), a
// sequence's logits are bitwise the same alone or batched, and the engine's
// greedy text is the same on five prompts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <nnsight/llm.hpp>

#include "support/paged_stepper.h"
#include "core/kv_cache.h"
#include "core/lazy_zeros.h"
#include "core/gguf/gguf_weights.h"
#include "core/kernels/packed_linear.h"
#include "core/weight_source.h"
#include "models/causal_lm.h"
#include "models/llama.h"
#include "support/real_model.h"

namespace nnsight {
namespace {

// GgufWeights directly: packed on every CPU (open_weights keeps weights
// packed only where the AVX-512 kernels exist).
std::shared_ptr<CausalLM> load(bool packed) {
  auto source = std::make_unique<GgufWeights>(testing::default_model_path(), packed);
  return load_causal_lm(*source, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
}

// A mixed schedule: sequence 1 (20-token prompt) prefills in chunks of 9 and
// 11 while sequence 0 (7 tokens) prefills and decodes; sequence 2 joins later.
struct Plan {
  std::vector<std::vector<int64_t>> watched;             // sequence 0's tokens per step
  std::vector<std::vector<std::vector<int64_t>>> steps;  // per step, per sequence
};

Plan make_plan(int64_t vocab) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> tok(3, vocab - 1);
  auto draw = [&](int64_t n) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(tok(rng));
    return v;
  };
  Plan p;
  p.watched = {draw(7), draw(1), draw(1), draw(1)};
  const std::vector<int64_t> p1 = draw(20);
  p.steps = {
      {p.watched[0], std::vector<int64_t>(p1.begin(), p1.begin() + 9), {}},
      {p.watched[1], std::vector<int64_t>(p1.begin() + 9, p1.end()), draw(5)},
      {p.watched[2], draw(1), draw(1)},
      {p.watched[3], draw(1), draw(1)},
  };
  return p;
}

TEST(RealModelPacked, EveryWeightMatrixStaysPackedAndParametersHoldNoFloats) {
  at::NoGradGuard no_grad;
  auto model = load(true);
  auto& llama = dynamic_cast<LlamaForCausalLM&>(*model);
  ASSERT_NE(llama.model->embed_tokens->packed_weight(), nullptr);
  EXPECT_EQ(llama.model->embed_tokens->packed_weight()->type, kernels::PackedType::Q8_0);
  EXPECT_EQ(llama.lm_head->packed_weight(), llama.model->embed_tokens->packed_weight());  // tied
  for (const auto& layer : llama.model->layer_ptrs) {
    for (const tp::ColumnParallelLinear* l :
         {layer->self_attn->q_proj.get(), layer->self_attn->k_proj.get(), layer->self_attn->v_proj.get(),
          layer->mlp->gate_proj.get(), layer->mlp->up_proj.get()}) {
      ASSERT_NE(l->packed_weight(), nullptr) << l->path();
      EXPECT_EQ(l->packed_weight()->type, kernels::PackedType::Q4_1);
      EXPECT_TRUE(is_nan_placeholder(l->weight)) << l->path();
    }
    ASSERT_NE(layer->self_attn->o_proj->packed_weight(), nullptr);
    ASSERT_NE(layer->mlp->down_proj->packed_weight(), nullptr);
  }
  // Parameters keep their shapes; the float values are decoded on demand and
  // equal the dequantized load's (q_proj: its rows un-permuted by index).
  auto dense = load(false);
  auto& ref = dynamic_cast<LlamaForCausalLM&>(*dense);
  EXPECT_EQ(llama.model->layer_ptrs[3]->self_attn->q_proj->weight.sizes(), (at::IntArrayRef{576, 576}));
  EXPECT_TRUE(at::equal(llama.model->layer_ptrs[3]->self_attn->q_proj->dense_weight(),
                        ref.model->layer_ptrs[3]->self_attn->q_proj->weight));
  EXPECT_TRUE(at::equal(llama.model->layer_ptrs[3]->self_attn->k_proj->dense_weight(),
                        ref.model->layer_ptrs[3]->self_attn->k_proj->weight));
  EXPECT_TRUE(at::equal(llama.lm_head->dense_weight(), ref.lm_head->weight));
}

TEST(RealModelPacked, LogitsEqualTheDequantizedModelOverAMixedBatch) {
  at::NoGradGuard no_grad;
  auto packed = load(true);
  auto dense = load(false);
  const Plan plan = make_plan(packed->config().vocab_size);
  testing::PagedStepper sp(*packed, 3, 16, 32), sd(*dense, 3, 16, 32);
  double worst = 0;
  for (size_t st = 0; st < plan.steps.size(); ++st) {
    auto a = sp.step(plan.steps[st], {1, 0, 2});
    auto b = sd.step(plan.steps[st], {1, 0, 2});
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].defined()) continue;
      const double scale = b[i].abs().max().item<double>();
      const double diff = (a[i].to(at::kDouble) - b[i].to(at::kDouble)).abs().max().item<double>();
      worst = std::max(worst, diff / scale);
      EXPECT_LE(diff, 1e-4 * scale) << "step " << st << " sequence " << i;
      // Stronger, and what the kernel promises: the very same bits.
      EXPECT_TRUE(testing::bitwise_equal(a[i], b[i])) << "step " << st << " sequence " << i;
      EXPECT_EQ(a[i].argmax().item<int64_t>(), b[i].argmax().item<int64_t>());
    }
  }
  std::cout << "packed vs dequantized logits: max relative difference " << worst << "\n";
}

TEST(RealModelPacked, ASequencesLogitsAreTheSameAloneOrBatched) {
  at::NoGradGuard no_grad;
  auto model = load(true);
  const Plan plan = make_plan(model->config().vocab_size);
  std::vector<at::Tensor> alone;
  {
    testing::PagedStepper s(*model, 1, 16, 32);
    for (const auto& t : plan.watched) alone.push_back(s.step({t}, {0})[0]);
  }
  ASSERT_FALSE(testing::bitwise_equal(alone[0], alone[1]));
  testing::PagedStepper s(*model, 3, 16, 32);
  for (size_t st = 0; st < plan.steps.size(); ++st) {
    auto got = s.step(plan.steps[st], {1, 0, 2});
    EXPECT_TRUE(testing::bitwise_equal(got[0], alone[st]))
        << "step " << st << ": max difference " << (got[0] - alone[st]).abs().max().item<double>();
    EXPECT_FALSE(testing::bitwise_equal(got[1], got[0]));
  }
}

// At a few rows a layer's q/k/v and gate/up projections run as one job
// (tp::forward_together); a hook on one of them sends that layer back to one
// call per projection. Either way: the same bits, and the hook sees every call.
TEST(RealModelPacked, HookedProjectionsRunOneByOneWithTheSameResults) {
  at::NoGradGuard no_grad;
  auto model = load(true);
  auto& llama = dynamic_cast<LlamaForCausalLM&>(*model);
  const Plan plan = make_plan(model->config().vocab_size);
  std::vector<std::vector<at::Tensor>> plain;
  {
    testing::PagedStepper s(*model, 3, 16, 32);
    for (const auto& step : plan.steps) plain.push_back(s.step(step, {1, 0, 2}));
  }
  auto& layer = *llama.model->layer_ptrs[4];
  std::vector<at::Tensor> seen_k, seen_up;
  HookHandle hk = layer.self_attn->k_proj->register_forward_hook(
      [&](Module&, const ModuleIO&, const ModuleIO& out) -> std::optional<ModuleIO> {
        seen_k.push_back(out.tensor().clone());
        return std::nullopt;
      });
  HookHandle hu = layer.mlp->up_proj->register_forward_hook(
      [&](Module&, const ModuleIO& in, const ModuleIO& out) -> std::optional<ModuleIO> {
        // What the projection computed is what one packed_linear call gives.
        EXPECT_TRUE(testing::bitwise_equal(
            out.tensor(), kernels::packed_linear(in.tensor(), *layer.mlp->up_proj->packed_weight(), at::Tensor())));
        seen_up.push_back(out.tensor());
        return std::nullopt;
      });
  testing::PagedStepper s(*model, 3, 16, 32);
  for (size_t st = 0; st < plan.steps.size(); ++st) {
    auto got = s.step(plan.steps[st], {1, 0, 2});
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].defined()) {
        EXPECT_TRUE(testing::bitwise_equal(got[i], plain[st][i])) << "step " << st;
      }
    }
  }
  EXPECT_EQ(seen_k.size(), plan.steps.size());
  EXPECT_EQ(seen_up.size(), plan.steps.size());
  EXPECT_EQ(seen_k.back().size(0), 3);  // the last step decodes one token for each sequence
  hk.remove();
  hu.remove();
}

// Through the engine (packed by default where the CPU has AVX-512).
TEST(RealModelPacked, GreedyTextIsTheSameAsDequantizedOnFivePrompts) {
  const std::vector<std::string> prompts = {"The capital of France is", "1, 2, 3, 4,", "Once upon a time",
                                            "def fibonacci(n):", "The Eiffel Tower is located in the city of"};
  auto params = SamplingParams().temperature(0).max_tokens(16);
  std::vector<RequestOutput> packed, dense;
  {
    LLM llm(EngineArgs().model(testing::default_model_path()).show_progress(false));
    packed = llm.generate(prompts, params);
  }
  {
    LLM llm(EngineArgs().model(testing::default_model_path()).show_progress(false).dequantize(true));
    dense = llm.generate(prompts, params);
  }
  ASSERT_EQ(packed.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(packed[i].error, "");
    EXPECT_FALSE(packed[i].token_ids.empty()) << prompts[i];
    EXPECT_EQ(packed[i].token_ids, dense[i].token_ids) << prompts[i];
    EXPECT_EQ(packed[i].text, dense[i].text) << prompts[i];
  }
  EXPECT_EQ(packed[0].text.rfind(" Paris", 0), 0u) << packed[0].text;
}

}  // namespace
}  // namespace nnsight
