// Tensor parallelism on the default model (SmolLM2-135M: 9 heads, 3 KV
// heads, 1536 MLP columns, 49152 vocabulary rows -- all divide by 3), with
// gloo between 3 worker processes: greedy outputs and traced reads and
// writes equal one process (values within 1e-4, tokens exactly), whether
// the engine starts the ranks or they are started by hand and rendezvous
// through a TCP store on 127.0.0.1 as they would across machines.
#include <gtest/gtest.h>

#include <cstdio>

#include <nnsight/nnsight.hpp>

#include "support/hand_started_workers.h"
#include "support/real_model.h"
#include "support/thread_ranks.h"
#include "support/tp_trace_battery.h"

namespace nnsight {
namespace {

EngineArgs args(int tp) {
  return EngineArgs()
      .model(testing::default_model_path())
      .show_progress(false)
      .kv_cache_memory_mb(64)
      .max_num_seqs(8)
      .tensor_parallel_size(tp);
}

LanguageModel& one_rank() {
  static LanguageModel* m = new LanguageModel(args(1));
  return *m;
}

testing::TraceBattery battery() {
  testing::TraceBattery b;
  b.prompts = {one_rank().encode("The Eiffel Tower is located in the city of"),
               one_rank().encode("The capital of France is")};
  b.reads = {"model.layers.5.self_attn.q_proj.input",  "model.layers.5.self_attn.q_proj.output",
             "model.layers.5.self_attn.k_proj.output", "model.layers.5.self_attn.o_proj.input",
             "model.layers.5.self_attn.o_proj.output", "model.layers.5.mlp.up_proj.output",
             "model.layers.5.mlp.down_proj.input",     "lm_head.output"};
  b.scaled_output = "model.layers.3.self_attn.q_proj";
  b.halved_input = "model.layers.3.self_attn.o_proj";
  b.up = "model.layers.5.mlp.up_proj";
  b.zero_from = 200;
  b.replacement_token = 7042;  // " Paris"
  return b;
}

const std::map<std::string, at::Tensor>& one_rank_results() {
  static auto* r = new std::map<std::string, at::Tensor>(testing::run_trace_battery(one_rank(), battery()));
  return *r;
}

std::vector<std::vector<int32_t>> greedy(LanguageModel& lm) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : battery().prompts)
    out.push_back(lm.trace(p, SamplingParams().temperature(0).max_tokens(8), [](Tracer&) {}).output().token_ids);
  return out;
}

TEST(RealModelTensorParallel, ThreeRanksEqualOneInGreedyOutputsAndTraces) {
  const auto& expected = one_rank_results();
  const auto expected_greedy = greedy(one_rank());
  LanguageModel lm(args(3));
  EXPECT_EQ(greedy(lm), expected_greedy);
  auto got = testing::run_trace_battery(lm, battery());
  // The trace saw model.layers.5.mlp.up_proj's whole output, [tokens, 1536].
  const int64_t tokens = static_cast<int64_t>(battery().prompts[0].size());
  EXPECT_EQ(got.at("read/0/model.layers.5.mlp.up_proj.output").sizes(), (std::vector<int64_t>{tokens, 1536}));
  EXPECT_EQ(got.at("read/0/model.layers.5.self_attn.k_proj.output").sizes(), (std::vector<int64_t>{tokens, 192}));
  EXPECT_EQ(got.at("zero/up/0").narrow(1, 200, 1336).abs().sum().item<double>(), 0.0);
  const double worst = testing::expect_same_results(expected, got, 1e-4);
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("TP=3 vs TP=1: max abs diff %.3g over %zu results\n", worst, got.size());
}

TEST(RealModelTensorParallel, TwoRanksAreRejectedNamingTheCounts) {
  try {
    LanguageModel lm(args(2));
    FAIL() << "9 heads cannot split over 2 ranks";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("number of attention heads (9) is not divisible by the tensor-parallel size (2)"),
        std::string::npos)
        << e.what();
  }
}

TEST(RealModelTensorParallel, RanksStartedByHandOverATcpStoreEqualOne) {
  const auto& expected = one_rank_results();
  testing::HandStartedWorkers workers(3);
  LanguageModel lm(args(3)
                       .worker_addresses(workers.addresses())
                       .tp_rendezvous("tcp://127.0.0.1:" + std::to_string(testing::free_tcp_port())));
  const double worst = testing::expect_same_results(expected, testing::run_trace_battery(lm, battery()), 1e-4);
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("3 hand-started ranks vs TP=1: max abs diff %.3g\n", worst);
}

}  // namespace
}  // namespace nnsight
