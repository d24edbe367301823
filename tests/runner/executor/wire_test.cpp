// The wire format between the engine and its workers: every message round
// trips field for field, and corrupt bytes become a WorkerError.
#include "runner/executor/wire.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runner/executor/worker_error.h"

namespace nnsight {
namespace {

TEST(Wire, SchedulerOutputRoundTrips) {
  runner::SchedulerOutput in;
  in.step = 42;
  runner::NewRequest nr;
  nr.id = 7;
  nr.params = SamplingParams()
                  .temperature(0.5)
                  .top_k(3)
                  .max_tokens(9)
                  .payload(std::string("\0graph\xff", 7))
                  .group_id("trace:3");
  nr.prompt_token_ids = {1, 2, 3};
  nr.seed = 1234567890123ull;
  in.new_requests.push_back(nr);
  batching::SeqSlot s;
  s.id = 7;
  s.token_ids = {2, 3};
  s.num_computed = 1;
  s.block_table = {4, 0};
  s.sample = true;
  s.num_generated = 5;
  s.recompute = true;
  in.scheduled.push_back(s);
  in.finished_ids = {3, 4};
  in.preempted_ids = {5};

  runner::SchedulerOutput out;
  runner::decode(runner::encode(in), out);
  EXPECT_EQ(out.step, 42u);
  ASSERT_EQ(out.new_requests.size(), 1u);
  EXPECT_EQ(out.new_requests[0].id, 7u);
  EXPECT_EQ(out.new_requests[0].params.payload(), nr.params.payload());
  EXPECT_EQ(out.new_requests[0].params.top_k(), 3);
  EXPECT_EQ(out.new_requests[0].params.group_id(), "trace:3");
  EXPECT_EQ(out.new_requests[0].prompt_token_ids, nr.prompt_token_ids);
  EXPECT_EQ(out.new_requests[0].seed, nr.seed);
  ASSERT_EQ(out.scheduled.size(), 1u);
  const batching::SeqSlot& o = out.scheduled[0];
  EXPECT_EQ(o.id, 7u);
  EXPECT_EQ(o.token_ids, s.token_ids);
  EXPECT_EQ(o.num_computed, 1);
  EXPECT_EQ(o.block_table, s.block_table);
  EXPECT_TRUE(o.sample);
  EXPECT_EQ(o.num_generated, 5);
  EXPECT_TRUE(o.recompute);
  EXPECT_EQ(out.finished_ids, in.finished_ids);
  EXPECT_EQ(out.preempted_ids, in.preempted_ids);
}

TEST(Wire, ModelRunnerOutputRoundTripsWithSaves) {
  runner::ModelRunnerOutput in;
  in.step = 3;
  runner::SampledToken t;
  t.id = 9;
  t.token = 17;
  t.has_logprobs = true;
  t.logprobs.token = 17;
  t.logprobs.logprob = -0.25f;
  t.logprobs.top = {{17, -0.25f}, {4, -2.0f}};
  in.sampled.push_back(t);
  runner::FinishedRequest f;
  f.id = 9;
  f.reason = FinishReason::kLength;
  f.saves["h"] = SavedValue(at::arange(6, at::kFloat).reshape({2, 3}));
  f.saves["each"] = SavedValue::of_list({at::ones({2}, at::kLong), at::zeros({1, 1}, at::kDouble)});
  in.finished.push_back(f);
  runner::FinishedRequest e;
  e.id = 10;
  e.reason = FinishReason::kError;
  e.error = "invoke 0: boom";
  in.finished.push_back(e);

  runner::ModelRunnerOutput out;
  runner::decode(runner::encode(in), out);
  EXPECT_EQ(out.step, 3u);
  ASSERT_EQ(out.sampled.size(), 1u);
  EXPECT_EQ(out.sampled[0].token, 17);
  EXPECT_FLOAT_EQ(out.sampled[0].logprobs.logprob, -0.25f);
  EXPECT_EQ(out.sampled[0].logprobs.top, t.logprobs.top);
  ASSERT_EQ(out.finished.size(), 2u);
  EXPECT_EQ(out.finished[0].reason, FinishReason::kLength);
  EXPECT_TRUE(out.finished[0].saves.at("h").tensor.equal(f.saves["h"].tensor));
  const auto& each = out.finished[0].saves.at("each");
  ASSERT_TRUE(each.is_list);
  ASSERT_EQ(each.list.size(), 2u);
  EXPECT_EQ(each.list[1].scalar_type(), at::kDouble);
  EXPECT_TRUE(each.list[0].equal(at::ones({2}, at::kLong)));
  EXPECT_EQ(out.finished[1].error, "invoke 0: boom");
}

TEST(Wire, WorkerInitAndReadyRoundTrip) {
  runner::WorkerInit in;
  in.args = EngineArgs().model("/m.gguf").max_num_seqs(3).intervention_memory_mb(77);
  in.rank = 1;
  in.world_size = 2;
  in.rendezvous = "tcp://h:1";
  runner::WorkerInit out;
  runner::decode(runner::encode(in), out);
  EXPECT_EQ(out.args.model(), "/m.gguf");
  EXPECT_EQ(out.args.max_num_seqs(), 3);
  EXPECT_EQ(out.args.intervention_memory_mb(), 77);
  EXPECT_EQ(out.rank, 1);
  EXPECT_EQ(out.rendezvous, "tcp://h:1");

  runner::WorkerReady ready;
  ready.num_kv_blocks = 12;
  ready.config.architecture = "gemma3_text";
  ready.config.multimodal = "gemma3";
  ready.config.vocab_size = 99;
  ready.config.attention_out_bias = false;  // not the default
  ready.config.model_type = "qwen2";
  ready.structure = runner::ModelStructure(
      {{"model.norm", "RMSNorm", 0, batching::RowLevel::kToken}, {"lm_head", "Linear", 0, batching::RowLevel::kPrompt}},
      {"model.norm.input", "model.norm.output", "lm_head.input", "lm_head.output", "logits"});
  ready.structure.mutable_modules()[0].inputs = {runner::ProbedTensor{{2, 32}, static_cast<int8_t>(at::kFloat)}};
  ready.structure.mutable_modules()[0].outputs = {runner::ProbedTensor{{2, 32}, static_cast<int8_t>(at::kBFloat16)},
                                                  runner::ProbedTensor()};
  ready.structure.set_logits(runner::ProbedTensor{{1, 99}, static_cast<int8_t>(at::kFloat)});
  runner::WorkerReady back;
  runner::decode(runner::encode(ready), back);
  // The probed shapes (scan) cross the wire and the server's JSON.
  for (const runner::ModelStructure& s :
       {back.structure, runner::ModelStructure::from_json(ready.structure.to_json(), "json")}) {
    ASSERT_EQ(s.modules()[0].outputs.size(), 2u);
    EXPECT_EQ(s.modules()[0].outputs[0].sizes, (std::vector<int64_t>{2, 32}));
    EXPECT_EQ(s.modules()[0].outputs[0].dtype, static_cast<int8_t>(at::kBFloat16));
    EXPECT_FALSE(s.modules()[0].outputs[1].defined());
    EXPECT_EQ(s.modules()[0].inputs[0].sizes, (std::vector<int64_t>{2, 32}));
    EXPECT_TRUE(s.modules()[1].outputs.empty());
    EXPECT_EQ(s.logits().sizes, (std::vector<int64_t>{1, 99}));
  }
  EXPECT_EQ(back.num_kv_blocks, 12);
  EXPECT_EQ(back.config.vocab_size, 99);
  EXPECT_EQ(back.config.multimodal, "gemma3");
  EXPECT_FALSE(back.config.attention_out_bias);
  EXPECT_EQ(back.config.model_type, "qwen2");
  ASSERT_EQ(back.structure.modules().size(), 2u);
  EXPECT_EQ(back.structure.row_level(*parse_provider_key("lm_head.output")), batching::RowLevel::kPrompt);
  EXPECT_EQ(back.structure.row_level(*parse_provider_key("model.norm.output")), batching::RowLevel::kToken);
  EXPECT_EQ(back.structure.events(), ready.structure.events());
}

TEST(Wire, CorruptBytesAreAWorkerError) {
  runner::ModelRunnerOutput in;
  in.sampled.push_back(runner::SampledToken{1, 2});
  const std::string good = runner::encode(in);
  runner::ModelRunnerOutput out;
  EXPECT_THROW(runner::decode(good.substr(0, good.size() / 2), out), runner::WorkerError);
  runner::SchedulerOutput so;
  EXPECT_THROW(runner::decode(std::string("\x01\x02\x03", 3), so), runner::WorkerError);
}

}  // namespace
}  // namespace nnsight
