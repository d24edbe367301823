// EngineArgs::fast_untraced on the default model (SmolLM2-135M Q4_1, its
// tied LM head Q8_0): in one step with untraced companions, a traced
// request's hidden states and logits are bitwise those of an engine without
// the option, at TP=1 and TP=3; an untraced request's rows are bitwise the
// same alone or batched (8-bit rows are batch invariant among themselves)
// and within the 8-bit rounding of the exact ones; a trace after 8-bit
// requests cached its prompt's KV blocks is still exact; the option refuses
// forward hooks and capture. Where this CPU has no 8-bit kernels every row
// must stay exact.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <nnsight/llm.hpp>
#include <nnsight/nnsight.hpp>

#include "core/gguf/gguf_weights.h"
#include "core/tokenizer/tokenizer_loader.h"
#include "core/kernels/packed_linear_q8.h"
#include "models/causal_lm.h"
#include "runner/model_runner/model_runner.h"
#include "support/bitwise_equal.h"
#include "support/real_model.h"
#include "support/thread_ranks.h"

namespace nnsight {
namespace {

using testing::bitwise_equal;

std::unique_ptr<runner::ModelRunner> make_runner(bool fast_untraced, const tp::ParallelContext& ctx = {}) {
  GgufWeights source(testing::default_model_path(), /*packed=*/true);
  auto model = load_causal_lm(source, ctx, at::TensorOptions().dtype(at::kFloat));
  runner::RunnerConfig rc;
  rc.num_blocks = 16;  // 256 tokens: enough, and 15 MB instead of the default's 1 GB
  rc.fast_untraced = fast_untraced;
  return std::make_unique<runner::ModelRunner>(std::move(model), rc);
}

bool int8_here() { return kernels::packed_q8_available(kernels::PackedType::Q4_1); }

std::vector<int32_t> tokens(const std::string& text) {
  static const Tokenizer tok = load_tokenizer_for_model(testing::default_model_path());
  return tok.encode(text, /*add_special_tokens=*/true);
}

struct Seq {
  uint64_t id;
  bool traced;  // carries a payload (no observer reads it here)
  std::vector<int32_t> prompt;
  std::vector<int32_t> blocks;
};

struct StepValues {
  at::Tensor hidden;  // [T, 576]
  at::Tensor logits;  // [S, vocab]
};

// Prefill of every sequence, then one decode step (token 1000 + the prompt's length), through
// the runner's phases; the values of both steps.
std::vector<StepValues> run(runner::ModelRunner& r, const std::vector<Seq>& seqs) {
  at::NoGradGuard no_grad;
  std::vector<StepValues> steps;
  for (int step = 0; step < 2; ++step) {
    runner::SchedulerOutput so;
    so.step = static_cast<uint64_t>(step);
    for (const Seq& s : seqs) {
      if (step == 0) {
        runner::NewRequest nr;
        nr.id = s.id;
        nr.params = SamplingParams().temperature(0).max_tokens(4);
        if (s.traced) nr.params.payload("graph");
        nr.prompt_token_ids = s.prompt;
        so.new_requests.push_back(nr);
      }
      batching::SeqSlot slot;
      slot.id = s.id;
      slot.token_ids = step == 0 ? s.prompt : std::vector<int32_t>{static_cast<int32_t>(1000 + s.prompt.size())};
      slot.num_computed = step == 0 ? 0 : static_cast<int64_t>(s.prompt.size());
      slot.block_table = s.blocks;
      slot.sample = true;
      slot.num_generated = step;
      so.scheduled.push_back(slot);
    }
    runner::ModelRunnerOutput out;
    r.update_states(so, out);
    r.prepare_inputs(so);
    at::Tensor hidden = r.forward().clone();
    steps.push_back({hidden, r.compute_logits(hidden).clone()});
  }
  return steps;
}

// The batch: a traced request between two untraced ones.
const std::vector<Seq>& batch() {
  static const std::vector<Seq> b = {
      {1, false, tokens("Once upon a time, in a small village by the sea, there lived an old fisherman who"), {0, 1}},
      {2, true, tokens("The Eiffel Tower is located in the city of"), {2}},
      {3, false, tokens("The capital of France is"), {3}}};
  return b;
}

// Token rows of sequence i of batch() at each step.
at::Tensor token_rows(size_t i, int step) {
  if (step == 1) return at::tensor(std::vector<int64_t>{static_cast<int64_t>(i)}, at::kLong);
  int64_t start = 0;
  for (size_t k = 0; k < i; ++k) start += static_cast<int64_t>(batch()[k].prompt.size());
  return at::arange(start, start + static_cast<int64_t>(batch()[i].prompt.size()), at::kLong);
}

TEST(RealModelFastUntraced, TracedRowsAreBitwiseExactBesideEightBitRows) {
  auto exact = make_runner(false), fast = make_runner(true);
  const std::vector<StepValues> want = run(*exact, batch()), got = run(*fast, batch());
  const at::Tensor row1 = at::tensor(std::vector<int64_t>{1}, at::kLong);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // The traced request (index 1): bitwise the exact engine's.
    EXPECT_TRUE(bitwise_equal(got[step].hidden.index_select(0, token_rows(1, step)),
                              want[step].hidden.index_select(0, token_rows(1, step))));
    EXPECT_TRUE(bitwise_equal(got[step].logits.index_select(0, row1), want[step].logits.index_select(0, row1)));
    // The untraced ones: 8-bit where this CPU can, close to exact.
    for (size_t i : {size_t(0), size_t(2)}) {
      const at::Tensor s = at::tensor(std::vector<int64_t>{static_cast<int64_t>(i)}, at::kLong);
      const at::Tensor g = got[step].logits.index_select(0, s), w = want[step].logits.index_select(0, s);
      if (!int8_here()) {
        EXPECT_TRUE(bitwise_equal(g, w)) << "no 8-bit kernels here: every row exact";
        continue;
      }
      EXPECT_FALSE(bitwise_equal(g, w)) << "request " << i << " did not run with 8-bit activations";
      // The largest logit error relative to the largest logit: 0.05-0.06 on
      // this model (30 layers of rounding), far below a broken row's ~1.
      const double err = (g - w).abs().max().item<double>() / w.abs().max().item<double>();
      EXPECT_LT(err, 0.1) << "request " << i;
      // After a real prompt the prediction is the exact one (step 1's token is arbitrary).
      if (step == 0) {
        EXPECT_EQ(g.argmax().item<int64_t>(), w.argmax().item<int64_t>()) << "request " << i;
      }
    }
  }
}

// At TP=3 (threads as ranks, gloo; the model's 3 KV heads allow 1 or 3):
// each rank's row-parallel layers round their own third of x's blocks, and
// a traced request's values are still bitwise the exact engine's at TP=3.
TEST(RealModelFastUntraced, TracedRowsAreBitwiseExactAtTensorParallelThree) {
  std::vector<std::vector<StepValues>> want(3), got(3);
  testing::run_ranks(3, [&](tp::ParallelContext& ctx) {
    auto exact = make_runner(false, ctx);
    want[static_cast<size_t>(ctx.rank())] = run(*exact, batch());
    auto fast = make_runner(true, ctx);
    got[static_cast<size_t>(ctx.rank())] = run(*fast, batch());
  });
  const at::Tensor row1 = at::tensor(std::vector<int64_t>{1}, at::kLong);
  const at::Tensor row0 = at::tensor(std::vector<int64_t>{0}, at::kLong);
  for (size_t rank = 0; rank < 3; ++rank) {
    for (int step = 0; step < 2; ++step) {
      SCOPED_TRACE("rank " + std::to_string(rank) + " step " + std::to_string(step));
      EXPECT_TRUE(bitwise_equal(got[rank][step].hidden.index_select(0, token_rows(1, step)),
                                want[rank][step].hidden.index_select(0, token_rows(1, step))));
      EXPECT_TRUE(
          bitwise_equal(got[rank][step].logits.index_select(0, row1), want[rank][step].logits.index_select(0, row1)));
      const at::Tensor g = got[rank][step].logits.index_select(0, row0),
                       w = want[rank][step].logits.index_select(0, row0);
      if (int8_here()) {
        EXPECT_FALSE(bitwise_equal(g, w)) << "the untraced request did not run with 8-bit activations";
        EXPECT_LT((g - w).abs().max().item<double>() / w.abs().max().item<double>(), 0.1);
      } else {
        EXPECT_TRUE(bitwise_equal(g, w));
      }
    }
  }
}

TEST(RealModelFastUntraced, UntracedRowsAreTheSameAloneOrBatched) {
  auto fast = make_runner(true);
  const std::vector<StepValues> batched = run(*fast, batch());
  // Sequences 0 and 2 again, each alone, under other ids and in other blocks.
  for (size_t i : {size_t(0), size_t(2)}) {
    const std::vector<StepValues> alone = run(*fast, {{11 + i, false, batch()[i].prompt, {5, 6}}});
    const at::Tensor s = at::tensor(std::vector<int64_t>{static_cast<int64_t>(i)}, at::kLong);
    for (int step = 0; step < 2; ++step) {
      SCOPED_TRACE("request " + std::to_string(i) + " step " + std::to_string(step));
      EXPECT_TRUE(bitwise_equal(batched[step].hidden.index_select(0, token_rows(i, step)), alone[step].hidden));
      EXPECT_TRUE(bitwise_equal(batched[step].logits.index_select(0, s), alone[step].logits));
    }
  }
}

TEST(RealModelFastUntraced, ATraceAfterEightBitRequestsCachedItsPromptIsExact) {
  const std::string prompt =
      "The Eiffel Tower is located in the city of Paris, the capital of France. It was built for the world's "
      "fair of 1889 and is one of the most visited monuments in the world. The tower is";
  const SamplingParams greedy = SamplingParams().temperature(0).max_tokens(2);
  LanguageModel exact(EngineArgs().model(testing::default_model_path()).show_progress(false));
  LanguageModel fast(EngineArgs().model(testing::default_model_path()).show_progress(false).fast_untraced(true));
  ASSERT_GE(fast.encode(prompt).size(), 33u) << "the prompt must fill two KV blocks";
  // Untraced: 8-bit rows, whose KV blocks the prefix cache keeps.
  const RequestOutput plain = fast.llm().generate(prompt, greedy);
  ASSERT_EQ(plain.token_ids.size(), 2u);
  Saved mid, logits, fast_mid, fast_logits;
  const TraceResult want = exact.trace(prompt, greedy, [&](Tracer&) {
    mid = exact.envoy("model.layers.20").output().save();
    logits = exact.logits().save();
  });
  const TraceResult got = fast.trace(prompt, greedy, [&](Tracer&) {
    fast_mid = fast.envoy("model.layers.20").output().save();
    fast_logits = fast.logits().save();
  });
  EXPECT_TRUE(bitwise_equal(got[fast_mid], want[mid]));
  EXPECT_TRUE(bitwise_equal(got[fast_logits], want[logits]));
  EXPECT_EQ(got.output().token_ids, want.output().token_ids);
}

// The option crosses the worker wire: worker processes (--executor mp) give
// the in-process 8-bit log-probabilities, not the exact ones.
TEST(RealModelFastUntraced, ReachesWorkerProcesses) {
  const SamplingParams p = SamplingParams().temperature(0).max_tokens(4).logprobs(0);
  const std::string prompt = "The capital of France is";
  auto logprobs = [&](EngineArgs args) {
    LLM llm(args.model(testing::default_model_path()).show_progress(false));
    std::vector<float> lp;
    for (const auto& t : llm.generate(prompt, p).logprobs) lp.push_back(t.logprob);
    return lp;
  };
  const std::vector<float> inproc = logprobs(EngineArgs().fast_untraced(true));
  const std::vector<float> workers = logprobs(EngineArgs().fast_untraced(true).executor("mp"));
  const std::vector<float> exact = logprobs(EngineArgs().executor("mp"));
  ASSERT_EQ(inproc.size(), 4u);
  EXPECT_EQ(workers, inproc);
  if (int8_here()) {
    EXPECT_NE(workers, exact) << "the workers ran exact";
  }
}

TEST(FastUntracedArgs, RefusesForwardHooksAndCapture) {
  const auto expect_refused = [](const EngineArgs& args, const std::string& what) {
    try {
      args.validate();
      ADD_FAILURE() << "no error for fast_untraced with " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("fast_untraced"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const std::string hooks = R"([{"name": "h", "target_modules": ["model.layers.0"], "hook_factory": "builtin:save"}])";
  expect_refused(EngineArgs().fast_untraced(true).forward_hooks(hooks), "forward_hooks");
  expect_refused(EngineArgs().fast_untraced(true).capture_enabled(true), "capture");
  EXPECT_NO_THROW(EngineArgs().fast_untraced(true).validate());
}

}  // namespace
}  // namespace nnsight
