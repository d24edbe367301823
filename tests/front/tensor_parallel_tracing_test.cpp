// Tensor parallelism end to end on tiny random models: engines with 2 and 4
// gloo ranks (worker processes) give the same greedy tokens as one process,
// and the same traces read and write whole tensors with the same results
// (values within 1e-4: the ranks sum in a different order; tokens exactly),
// attention internals (q/k/v, scores, pattern, z, resid_mid) included, and
// writes of a head's pattern and of z re-sharded by head.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>

#include <nnsight/nnsight.hpp>

#include "runner/engine/engine.h"
#include "runner/executor/mp_executor.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_models.h"
#include "support/tp_trace_battery.h"

namespace nnsight {
namespace {

std::vector<int32_t> prompt(int seed, int n, int vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (seed * 17 + i * 11) % (vocab - 3));
  return p;
}

EngineArgs args_for(const std::string& dir, int tp) {
  return EngineArgs().model(dir).kv_cache_memory_mb(8).show_progress(false).worker_timeout_s(60).tensor_parallel_size(
      tp);
}

struct Arch {
  ModelConfig config;
  testing::TraceBattery battery;
};

Arch llama() {
  Arch a{testing::tiny_tp_llama_config(), {}};  // 4 heads, 2 KV heads, MLP 48
  a.battery.prompts = {prompt(1, 7, 96), prompt(2, 5, 96)};
  a.battery.reads = {"model.layers.1.self_attn.q_proj.input",
                     "model.layers.1.self_attn.q_proj.output",
                     "model.layers.1.self_attn.k_proj.output",
                     "model.layers.1.self_attn.v_proj.output",
                     "model.layers.1.self_attn.q.output",
                     "model.layers.1.self_attn.k.output",
                     "model.layers.1.self_attn.v.output",
                     "model.layers.1.self_attn.scores.output",
                     "model.layers.1.self_attn.pattern.output",
                     "model.layers.1.self_attn.z.output",
                     "model.layers.1.self_attn.o_proj.input",
                     "model.layers.1.self_attn.o_proj.output",
                     "model.layers.1.resid_mid.output",
                     "model.layers.1.mlp.up_proj.output",
                     "model.layers.1.mlp.act_fn.output",
                     "model.layers.1.mlp.down_proj.input",
                     "model.layers.1.mlp.down_proj.output",
                     "model.layers.1.output",
                     "lm_head.output"};
  a.battery.scaled_output = "model.layers.0.self_attn.q_proj";
  a.battery.halved_input = "model.layers.0.self_attn.o_proj";
  a.battery.up = "model.layers.0.mlp.up_proj";
  a.battery.zero_from = 20;
  a.battery.attention = "model.layers.0.self_attn";
  return a;
}

Arch gpt2() {
  Arch a{testing::tiny_tp_gpt2_config(), {}};  // 4 heads, fused c_attn, MLP 128
  a.battery.prompts = {prompt(3, 6, 88), prompt(4, 9, 88)};
  a.battery.reads = {
      "transformer.h.1.attn.c_attn.output", "transformer.h.1.attn.q.output",     "transformer.h.1.attn.pattern.output",
      "transformer.h.1.attn.z.output",      "transformer.h.1.attn.c_proj.input", "transformer.h.1.attn.c_proj.output",
      "transformer.h.1.resid_mid.output",   "transformer.h.1.mlp.c_fc.output",   "transformer.h.1.mlp.act.input",
      "transformer.h.1.mlp.c_proj.input",   "transformer.h.1.mlp.output",        "lm_head.output"};
  a.battery.scaled_output = "transformer.h.0.attn.c_attn";
  a.battery.halved_input = "transformer.h.0.attn.c_proj";
  a.battery.up = "transformer.h.0.mlp.c_fc";
  a.battery.zero_from = 50;
  a.battery.attention = "transformer.h.0.attn";
  return a;
}

// One checkpoint and one TP=1 reference per architecture, shared by the tests.
struct Reference {
  Arch arch;
  std::unique_ptr<testing::ScratchDir> dir = std::make_unique<testing::ScratchDir>();
  std::map<std::string, at::Tensor> results;
  std::vector<std::vector<int32_t>> greedy;
};

std::vector<std::vector<int32_t>> greedy_outputs(LanguageModel& lm, const Arch& a) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : a.battery.prompts)
    out.push_back(
        lm.trace(p, SamplingParams().temperature(0).max_tokens(8).ignore_eos(true), [](Tracer&) {}).output().token_ids);
  return out;
}

Reference& reference(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Reference>> cache;
  auto& slot = cache[name];
  if (!slot) {
    slot = std::make_unique<Reference>();
    slot->arch = name == "llama" ? llama() : gpt2();
    auto model = testing::tiny_random_model(slot->arch.config, 21);
    testing::write_hf_checkpoint(slot->dir->path(), *model);
    LanguageModel lm(args_for(slot->dir->path(), 1));
    slot->results = testing::run_trace_battery(lm, slot->arch.battery);
    slot->greedy = greedy_outputs(lm, slot->arch);
  }
  return *slot;
}

class TensorParallelTracing : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TensorParallelTracing, SameTokensAndTracesAsOneRank) {
  const auto& [arch, tp] = GetParam();
  Reference& ref = reference(arch);
  LanguageModel lm(args_for(ref.dir->path(), tp));
  EXPECT_EQ(greedy_outputs(lm, ref.arch), ref.greedy);
  auto got = testing::run_trace_battery(lm, ref.arch.battery);
  const double worst = testing::expect_same_results(ref.results, got, 1e-4);
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("%s TP=%d vs TP=1: max abs diff %.3g over %zu results\n", arch.c_str(), tp, worst, got.size());
  // Interventions saw whole tensors: the MLP's column-parallel output has
  // every column, K/V every KV head once (2 x 8 at 4 ranks too).
  const int64_t inter = ref.arch.config.intermediate_size;
  const std::string up = arch == "llama" ? "model.layers.1.mlp.up_proj.output" : "transformer.h.1.mlp.c_fc.output";
  const int64_t tokens = static_cast<int64_t>(ref.arch.battery.prompts[0].size());
  EXPECT_EQ(got.at("read/0/" + up).sizes(), (std::vector<int64_t>{tokens, inter}));
  if (arch == "llama")
    EXPECT_EQ(got.at("read/1/model.layers.1.self_attn.k_proj.output").sizes(), (std::vector<int64_t>{5, 16}));
  else
    EXPECT_EQ(got.at("read/1/transformer.h.1.attn.c_attn.output").sizes(), (std::vector<int64_t>{9, 96}));
}

INSTANTIATE_TEST_SUITE_P(TinyModels, TensorParallelTracing,
                         ::testing::Values(std::make_tuple("llama", 2), std::make_tuple("llama", 4),
                                           std::make_tuple("gpt2", 2), std::make_tuple("gpt2", 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
                         });

TEST(TensorParallelStartup, ASizeThatDoesNotDivideIsRejectedNamingTheCounts) {
  Reference& ref = reference("llama");
  try {
    LanguageModel lm(args_for(ref.dir->path(), 3));
    FAIL() << "expected the engine to refuse 3 ranks for 4 heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("number of attention heads (4) is not divisible by the tensor-parallel "
                                         "size (3)"),
              std::string::npos)
        << e.what();
  }
}

TEST(TensorParallelFailure, KillingARankMidGenerationEndsTheRequestWithAnError) {
  Reference& ref = reference("llama");
  runner::Engine engine(args_for(ref.dir->path(), 2));
  auto& exec = dynamic_cast<runner::MultiProcExecutor&>(engine.executor());
  runner::RequestInput in;
  in.prompt_token_ids = ref.arch.battery.prompts[0];
  in.params = SamplingParams().temperature(0).max_tokens(500).ignore_eos(true);
  const uint64_t id = engine.add_request(in);
  engine.step();
  engine.step();
  ::kill(exec.worker_pids().at(1), SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  RequestOutput last;
  for (int guard = 0; engine.has_unfinished() && guard < 1000; ++guard)
    for (auto& o : engine.step())
      if (o.request_id == id && o.finished) last = o;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  EXPECT_EQ(last.finish_reason, FinishReason::kError);
  EXPECT_NE(last.error.find("worker rank 1 died"), std::string::npos) << last.error;
}

}  // namespace
}  // namespace nnsight
