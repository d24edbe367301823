// The engine on a tiny random model: batch invariance under batching,
// arrivals while others decode, chunked prefill, preemption and prefix
// caching; seeded sampling; stopping.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <nnsight/error.hpp>

#include "support/tiny_engine.h"
#include "support/tiny_models.h"
#include "support/trace_beside.h"

namespace nnsight {
namespace {

using testing::run_to_completion;
using testing::tiny_engine;
using testing::tiny_llama;

// 16 prompts of mixed lengths (3..40 tokens); every 4th shares a 33-token prefix.
std::vector<std::vector<int32_t>> mixed_prompts() {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(3, 96);
  std::vector<int32_t> shared(33);
  for (auto& t : shared) t = tok(rng);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> p;
    if (i % 4 == 0) p = shared;
    const int extra = 3 + (i * 7) % 38;
    for (int j = 0; j < extra; ++j) p.push_back(tok(rng));
    prompts.push_back(p);
  }
  return prompts;
}

SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

std::vector<std::vector<int32_t>> generate(runner::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                           const SamplingParams& params) {
  std::vector<uint64_t> ids;
  for (const auto& p : prompts) {
    runner::RequestInput in;
    in.prompt_token_ids = p;
    in.params = params;
    ids.push_back(engine.add_request(in));
  }
  auto done = run_to_completion(engine);
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids) {
    EXPECT_EQ(done.at(id).error, "");
    out.push_back(done.at(id).token_ids);
  }
  return out;
}

std::vector<std::vector<int32_t>> solo_outputs(const std::vector<std::vector<int32_t>>& prompts,
                                               const SamplingParams& params) {
  std::vector<std::vector<int32_t>> out;
  auto model = tiny_llama();
  for (const auto& p : prompts) {
    auto engine = tiny_engine(EngineArgs().enable_prefix_caching(false).kv_cache_memory_mb(4), model);
    out.push_back(generate(*engine, {p}, params).front());
  }
  return out;
}

class BatchInvariance : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    prompts_ = mixed_prompts();
    solo_ = solo_outputs(prompts_, greedy(12));
    // Guard against a vacuous comparison: every solo run generated 12 tokens,
    // and the random model does not answer every prompt alike.
    std::set<std::vector<int32_t>> distinct;
    for (const auto& s : solo_) {
      ASSERT_EQ(s.size(), 12u);
      distinct.insert(s);
    }
    ASSERT_GT(distinct.size(), 8u);
  }
  static std::vector<std::vector<int32_t>> prompts_, solo_;
};
std::vector<std::vector<int32_t>> BatchInvariance::prompts_, BatchInvariance::solo_;

TEST_F(BatchInvariance, OneBatchedRunEqualsSoloRuns) {
  auto engine = tiny_engine(EngineArgs().enable_prefix_caching(false).kv_cache_memory_mb(16), tiny_llama());
  EXPECT_EQ(generate(*engine, prompts_, greedy(12)), solo_);
}

TEST_F(BatchInvariance, ChunkedPrefill) {
  // A 16-token budget forces every prompt longer than that through several chunks.
  auto engine = tiny_engine(EngineArgs().enable_prefix_caching(false).max_num_batched_tokens(16).kv_cache_memory_mb(16),
                            tiny_llama());
  EXPECT_EQ(generate(*engine, prompts_, greedy(12)), solo_);
}

TEST_F(BatchInvariance, PreemptionUnderTinyKvBudget) {
  // 14 blocks of 8 tokens: two long requests cannot both grow; some must wait and be recomputed.
  auto engine = tiny_engine(EngineArgs().enable_prefix_caching(false).block_size(8).num_kv_blocks(14), tiny_llama());
  EXPECT_EQ(generate(*engine, prompts_, greedy(12)), solo_);
  EXPECT_GT(engine->scheduler().num_preemptions(), 0);
}

TEST_F(BatchInvariance, PrefixCachingWithSharedPrefix) {
  auto engine =
      tiny_engine(EngineArgs().enable_prefix_caching(true).block_size(8).kv_cache_memory_mb(16), tiny_llama());
  // First wave fills the cache; second wave (same prompts) must hit it and still match.
  EXPECT_EQ(generate(*engine, prompts_, greedy(12)), solo_);
  EXPECT_GT(engine->scheduler().blocks().num_cached_blocks(), 0);
  EXPECT_EQ(generate(*engine, prompts_, greedy(12)), solo_);
}

// Requests arriving one per step: every step after the first mixes the
// earlier requests' decodes with a new prompt's prefill, as a server's steps
// do. Each request's tokens are still its solo run's.
TEST_F(BatchInvariance, ArrivalsWhileOthersDecode) {
  auto engine = tiny_engine(EngineArgs().enable_prefix_caching(false).kv_cache_memory_mb(16), tiny_llama());
  std::vector<uint64_t> ids;
  std::map<uint64_t, RequestOutput> done;
  for (const auto& p : prompts_) {
    runner::RequestInput in;
    in.prompt_token_ids = p;
    in.params = greedy(12);
    ids.push_back(engine->add_request(in));
    // The running requests decode and the new one is admitted in this same step.
    for (auto& o : engine->step())
      if (o.finished) done[o.request_id] = o;
  }
  for (auto& [id, o] : run_to_completion(*engine)) done[id] = o;
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids) out.push_back(done.at(id).token_ids);
  EXPECT_EQ(out, solo_);
}

// The same for a trace's saves: a request saving layer 1's output at every
// step saves the same bits alone and while 11 others arrive one per step.
TEST(BatchInvarianceTraced, SavesDoNotDependOnCompanionsArrivingWhileItDecodes) {
  const auto run = [](int64_t companions) {
    auto [engine, runner] = testing::tiny_engine_with_runner(EngineArgs().kv_cache_memory_mb(16), tiny_llama());
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(companions));
    for (int64_t s = 0; s < companions; ++s)
      for (int64_t t = 0; t < 4 + 3 * s; ++t) prompts[s].push_back(static_cast<int32_t>(3 + (s * 11 + t * 5) % 90));
    return testing::run_trace_beside(*engine, *runner, prompts, 10, testing::save_every_step("model.layers.1.output"),
                                     8, /*join_midway=*/true);
  };
  const testing::TraceBeside alone = run(0), midway = run(11);
  EXPECT_EQ(alone.tokens.back(), midway.tokens.back());
  ASSERT_TRUE(alone.saved.defined() && midway.saved.defined());
  EXPECT_EQ(midway.saved.size(0), 4 + 7) << "the prompt's 4 rows, then one per decode step";
  EXPECT_TRUE(at::equal(alone.saved, midway.saved));
  EXPECT_EQ(midway.tokens.size(), 12u);
}

TEST(Sampling, SeededSamplingIgnoresBatchCompanions) {
  auto prompts = mixed_prompts();
  auto params = SamplingParams().temperature(0.9).top_p(0.9).top_k(40).seed(1234).max_tokens(10).ignore_eos(true);
  auto alone = tiny_engine(EngineArgs().kv_cache_memory_mb(8), tiny_llama());
  auto a = generate(*alone, {prompts[3]}, params);
  auto batched = tiny_engine(EngineArgs().kv_cache_memory_mb(16), tiny_llama());
  auto b = generate(*batched, prompts, params);
  EXPECT_EQ(a.front(), b[3]);
  // Different seeds give different samples (the test could not detect a constant sampler otherwise).
  auto other = generate(*alone, {prompts[3]}, SamplingParams(params).seed(99));
  EXPECT_NE(a.front(), other.front());
}

// Every id of the model's eos list ends a sequence (Llama 3 Instruct's
// <|eot_id|> after <|end_of_text|>), unless the request ignores eos.
TEST(Stopping, EveryEosIdOfTheModelStops) {
  auto prompts = mixed_prompts();
  auto free_run =
      generate(*tiny_engine(EngineArgs().kv_cache_memory_mb(8), tiny_llama()), {prompts[1]}, greedy(10)).front();
  ModelConfig cfg = testing::tiny_llama_config(false);
  cfg.max_position = 256;
  ASSERT_NE(cfg.eos_token_id, free_run[2]);
  cfg.add_eos_token_id(free_run[2]);  // the third generated token's id, not eos_token_id
  ASSERT_TRUE(cfg.is_eos(free_run[2]) && cfg.is_eos(cfg.eos_token_id));
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  testing::randomize(*model, 11);  // tiny_llama()'s weights
  auto engine = tiny_engine(EngineArgs().kv_cache_memory_mb(8), model);
  runner::RequestInput in;
  in.prompt_token_ids = prompts[1];
  in.params = SamplingParams().temperature(0).max_tokens(10);
  const auto id = engine->add_request(in);
  const auto out = run_to_completion(*engine).at(id);
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  const auto first = std::find_if(free_run.begin(), free_run.end(), [&](int32_t t) { return cfg.is_eos(t); });
  ASSERT_LE(first - free_run.begin(), 2);
  EXPECT_EQ(out.token_ids, std::vector<int32_t>(free_run.begin(), first + 1));
  in.params = greedy(10);  // ignore_eos
  const auto all = engine->add_request(in);
  EXPECT_EQ(run_to_completion(*engine).at(all).token_ids, free_run);
}

TEST(Stopping, MaxTokensStopIdsAndAbort) {
  auto engine = tiny_engine(EngineArgs().kv_cache_memory_mb(8), tiny_llama());
  auto prompts = mixed_prompts();
  auto free_run = generate(*engine, {prompts[1]}, greedy(10)).front();
  ASSERT_EQ(free_run.size(), 10u);
  // Stop at the 4th generated token's id: generation ends right there with reason stop.
  runner::RequestInput in;
  in.prompt_token_ids = prompts[1];
  in.params = greedy(10).stop_token_ids({free_run[3]});
  auto id = engine->add_request(in);
  auto done = run_to_completion(*engine);
  const auto& out = done.at(id);
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  ASSERT_FALSE(out.token_ids.empty());
  EXPECT_EQ(out.token_ids.back(), free_run[3]);
  EXPECT_LE(out.token_ids.size(), 4u);

  in.params = greedy(10);
  auto length_id = engine->add_request(in);
  EXPECT_EQ(run_to_completion(*engine).at(length_id).finish_reason, FinishReason::kLength);

  in.params = greedy(200);
  auto abort_id = engine->add_request(in);
  engine->step();
  engine->step();
  EXPECT_TRUE(engine->abort(abort_id));
  auto aborted = run_to_completion(*engine).at(abort_id);
  EXPECT_EQ(aborted.finish_reason, FinishReason::kAbort);
  EXPECT_LT(aborted.token_ids.size(), 200u);
  EXPECT_FALSE(engine->has_unfinished());
}

// The KV cache takes memory lazily on the CPU, so a budget the machine cannot
// hold is refused when the engine starts, naming the setting.
TEST(Params, KvCacheLargerThanTheMachineIsRefused) {
  const auto expect_refused = [](const EngineArgs& args, const std::string& field) {
    try {
      tiny_engine(args, tiny_llama());
      ADD_FAILURE() << "no error for " << field;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("available"), std::string::npos) << e.what();
    }
  };
  expect_refused(EngineArgs().kv_cache_memory_mb(int64_t(1) << 30), "kv_cache_memory_mb");  // 1 PiB
  expect_refused(EngineArgs().num_kv_blocks(int64_t(1) << 40), "num_kv_blocks");
}

TEST(Params, BadValuesNameTheField) {
  auto expect_msg = [](const SamplingParams& p, const std::string& field) {
    try {
      p.validate();
      ADD_FAILURE() << "no error for " << field;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_msg(SamplingParams().temperature(-1), "temperature");
  expect_msg(SamplingParams().top_p(0), "top_p");
  expect_msg(SamplingParams().top_p(1.5), "top_p");
  expect_msg(SamplingParams().max_tokens(0), "max_tokens");
  expect_msg(SamplingParams().min_p(2), "min_p");
  auto engine = tiny_engine(EngineArgs().kv_cache_memory_mb(4), tiny_llama());
  runner::RequestInput in;
  in.prompt_token_ids = {1, 2, 3};
  in.params = SamplingParams().temperature(-0.5);
  EXPECT_THROW(engine->add_request(in), ConfigError);
  in.params = SamplingParams();
  in.prompt_token_ids = {1, 500};
  EXPECT_THROW(engine->add_request(in), ConfigError);  // id outside the vocabulary
  EXPECT_FALSE(engine->has_unfinished());
}

}  // namespace
}  // namespace nnsight
