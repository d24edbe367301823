// Calling the model's own modules inside a trace (`call` nodes,
// lm.envoy(path)(x)) on the default model: the logit lens inside the trace
// predicts " Paris" and its last layer equals the engine's logits; the same
// graph as JSON through `nnsight trace` saves the same tensors; a call fires
// no hooks of other traces; attention and decoder layers are refused at the
// user's line; and at TP=3 (gloo, worker processes) calls of split modules
// (the LM head over the vocabulary, q_proj's columns, o_proj's input, an MLP)
// equal TP=1.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <nnsight/nnsight.hpp>

#include "core/safetensors/safetensors_file.h"
#include "support/real_model.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

const char* kEiffel = "The Eiffel Tower is located in the city of";

LanguageModel& lm() {
  static LanguageModel* m = new LanguageModel(EngineArgs().model(testing::default_model_path()).show_progress(false));
  return *m;
}

double rel(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>() / want.abs().max().item<double>();
}

TEST(RealModelModuleCall, LogitLensInsideTheTraceEqualsTheFinalLogits) {
  Saved lens, logits, mid;
  auto out = lm().trace(kEiffel, SamplingParams().temperature(0).max_tokens(1), [&](Tracer&) {
    auto norm = lm().envoy("model.norm");
    auto head = lm().envoy("lm_head");
    mid = head(norm(lm().envoy("model.layers.15").output())).save();
    lens = head(norm(lm().envoy("model.layers.29").output())).save();  // [tokens, vocab]
    logits = lm().logits().save();                                     // [1, vocab]
  });
  const int64_t n = static_cast<int64_t>(lm().encode(kEiffel).size());
  ASSERT_EQ(out[lens].sizes(), (std::vector<int64_t>{n, 49152}));
  EXPECT_LE(rel(out[lens][n - 1], out[logits][0]), 1e-4);
  EXPECT_EQ(lm().decode({static_cast<int32_t>(out[lens][n - 1].argmax().item<int64_t>())}), " Paris");
  // A middle layer predicts something else there: the call really used layer 15's values.
  EXPECT_GT(rel(out[mid][n - 1], out[logits][0]), 1e-2);
}

TEST(RealModelModuleCall, JsonGraphThroughTheCliSavesTheSame) {
  testing::ScratchDir dir;
  const std::string graph = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/logit_lens.json";
  const std::string file = dir.file("lens.safetensors");
  const std::string cmd = std::string(NNSIGHT_CLI) + " trace --model '" + testing::default_model_path() +
                          "' --prompt '" + kEiffel + "' --graph '" + graph + "' --out '" + file +
                          "' --no-progress > /dev/null 2> '" + dir.file("err") + "'";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  Saved lens15, lens29, logits;
  auto out = lm().trace(kEiffel, SamplingParams().temperature(0).max_tokens(1), [&](Tracer&) {
    auto norm = lm().envoy("model.norm");
    auto head = lm().envoy("lm_head");
    lens15 = head(norm(lm().envoy("model.layers.15").output())).save();
    lens29 = head(norm(lm().envoy("model.layers.29").output())).save();
    logits = lm().logits().save();
  });
  SafetensorsFile saved(file);
  EXPECT_TRUE(at::equal(saved.load("lens15"), out[lens15]));
  EXPECT_TRUE(at::equal(saved.load("lens29"), out[lens29]));
  EXPECT_TRUE(at::equal(saved.load("logits"), out[logits]));
}

// Invoke 0 runs layer 5's MLP on layer 2's output while invoke 1 reads that
// MLP's output: invoke 1 sees the model's own computation, not the call.
TEST(RealModelModuleCall, ACallFiresNoHooksOfOtherInvokes) {
  Saved alone, with_call, called;
  auto solo = lm().trace(kEiffel, SamplingParams().temperature(0).max_tokens(1),
                         [&](Tracer&) { alone = lm().envoy("model.layers.5.mlp").output().save(); });
  auto both = lm().trace(SamplingParams().temperature(0).max_tokens(1), [&](Tracer& t) {
    t.invoke(kEiffel, [&] { called = lm().envoy("model.layers.5.mlp")(lm().envoy("model.layers.2").output()).save(); });
    t.invoke(kEiffel, [&] { with_call = lm().envoy("model.layers.5.mlp").output().save(); });
  });
  EXPECT_TRUE(at::equal(both[with_call], solo[alone]));
  EXPECT_FALSE(at::equal(both[called], solo[alone]));
  EXPECT_EQ(both[called].sizes(), solo[alone].sizes());
}

TEST(RealModelModuleCall, AttentionAndDecoderLayersAreRefusedAtTheUsersLine) {
  for (const std::string path : {"model.layers.3.self_attn", "model.layers.3", "model"}) {
    SCOPED_TRACE(path);
    try {
      lm().trace(kEiffel, SamplingParams().max_tokens(1), [&](Tracer&) {
        lm().envoy(path)(lm().envoy("model.layers.2").output()).save();  // line below + 0
      });
      FAIL() << "calling " << path << " must be refused";
    } catch (const TraceError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("real_model_module_call_test.cpp:"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cannot be called"), std::string::npos) << msg;
    }
  }
  EXPECT_TRUE(lm().callable("model.layers.3.mlp"));
  EXPECT_TRUE(lm().callable("model.layers.3.self_attn.q_proj"));
  EXPECT_FALSE(lm().callable("model.layers.3.self_attn"));
}

// Saves of calls on split modules at `tp` ranks.
std::vector<at::Tensor> split_module_calls(int tp) {
  LanguageModel m(EngineArgs()
                      .model(testing::default_model_path())
                      .show_progress(false)
                      .tensor_parallel_size(tp)
                      .kv_cache_memory_mb(64)
                      .worker_timeout_s(120));
  std::vector<Saved> s(5);
  auto out = m.trace(kEiffel, SamplingParams().temperature(0).max_tokens(1), [&](Tracer&) {
    Proxy h = m.envoy("model.layers.20").output();
    s[0] = m.envoy("lm_head")(m.envoy("model.norm")(h)).save();                            // vocabulary split, gathered
    s[1] = m.envoy("model.layers.21.self_attn.q_proj")(h).save();                          // output columns split
    s[2] = m.envoy("model.layers.21.self_attn.o_proj")(h).save();                          // input split, summed
    s[3] = m.envoy("model.layers.21.mlp")(h).save();                                       // whole in, whole out
    s[4] = m.envoy("model.embed_tokens")(at::tensor({7042, 5, 49151}, at::kLong)).save();  // ids in, rows split
  });
  std::vector<at::Tensor> v;
  for (const Saved& x : s) v.push_back(out[x]);
  return v;
}

TEST(RealModelModuleCall, CallsOfSplitModulesAtThreeRanksEqualOne) {
  const auto one = split_module_calls(1), three = split_module_calls(3);
  for (size_t i = 0; i < one.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(one[i].sizes(), three[i].sizes());
    EXPECT_LE(rel(three[i], one[i]), 1e-4);
  }
}

}  // namespace
}  // namespace nnsight
