// The Hugging Face fixtures (tests/data/models/<arch> by transformers 4.51.3,
// tests/data/models-v5/<arch> by 5.x; see hf_fixture_test.cpp) through the whole engine: the scheduler's chunked
// prefill and mixed batches reproduce transformers' greedy continuations, and a trace that zeroes a module named by its
// Hugging Face path gives transformers' ablated logits.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include <cstdlib>

#include "core/safetensors/safetensors_file.h"
#include "core/weight_source.h"
#include "support/hf_fixtures.h"
#include "support/tiny_engine.h"

namespace nnsight {
namespace {

using testing::HfFixtureCase;

std::string fixture_dir(const HfFixtureCase& f) { return testing::hf_fixture_dir(f); }

std::vector<int32_t> ints(const at::Tensor& t) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<int32_t>(t[i].item<int64_t>()));
  return out;
}

class HfFixtureEngine : public ::testing::TestWithParam<HfFixtureCase> {};

TEST_P(HfFixtureEngine, ChunkedMixedBatchesReproduceGreedyContinuations) {
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = fixture.arch;
  SafetensorsFile ref(fixture_dir(fixture) + "/reference.safetensors");
  auto source = open_weights(fixture_dir(fixture));
  std::shared_ptr<CausalLM> model =
      load_causal_lm(*source, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  // 8 tokens per step: the 13- and 21-token prompts are chunked, decodes share steps with prefills.
  auto engine = testing::tiny_engine(
      EngineArgs().enable_prefix_caching(false).max_num_batched_tokens(8).block_size(4).kv_cache_memory_mb(4), model);
  std::vector<uint64_t> ids;
  for (int s = 0; s < 3; ++s) {
    runner::RequestInput in;
    in.prompt_token_ids = ints(ref.load("ids." + std::to_string(s)));
    in.params = SamplingParams().temperature(0).max_tokens(6).ignore_eos(true);
    ids.push_back(engine->add_request(in));
  }
  auto done = testing::run_to_completion(*engine);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(done.at(ids[s]).error, "");
    EXPECT_EQ(done.at(ids[s]).token_ids, ints(ref.load("greedy." + std::to_string(s)))) << arch << " sequence " << s;
  }
}

TEST_P(HfFixtureEngine, TraceAblationAtHuggingFacePath) {
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = fixture.arch;
  SafetensorsFile ref(fixture_dir(fixture) + "/reference.safetensors");
  const std::string path = ref.metadata().at("ablate");
  LanguageModel lm(EngineArgs().model(fixture_dir(fixture)).kv_cache_memory_mb(4).show_progress(false));
  const std::vector<int32_t> p = ints(ref.load("ids.0"));
  Saved zeroed, logits;
  auto out = lm.trace(p, SamplingParams().temperature(0).max_tokens(1), [&](Tracer&) {
    auto m = lm.envoy(path);
    m.output() = m.output() * 0;
    zeroed = m.output().save();
    logits = lm.logits().save();
  });
  EXPECT_EQ(out[zeroed].abs().sum().item<double>(), 0.0);
  const at::Tensor want = ref.load("ablation.logits")[p.size() - 1];  // [vocab]
  const double rel = (out[logits][0] - want).abs().max().item<double>() / want.abs().max().item<double>();
  EXPECT_LE(rel, 1e-4) << arch << " with " << path << " zeroed";
}

const std::vector<std::string> kArchs = {"llama",    "mistral", "qwen2", "qwen3",       "gemma",   "gemma2",
                                         "gpt_neox", "olmo2",   "phi3",  "gemma3_text", "mixtral", "qwen3_moe"};
// transformers 5.x also wrote a multimodal Gemma 3 (its text model served)
// and OLMo 3 and SmolLM3 (newer than 4.51).
std::vector<std::string> v5_archs() {
  std::vector<std::string> a = kArchs;
  for (const char* arch : {"gemma3", "olmo3", "smollm3"}) a.push_back(arch);
  return a;
}
INSTANTIATE_TEST_SUITE_P(Models, HfFixtureEngine, ::testing::ValuesIn(testing::hf_fixtures(kArchs, v5_archs())),
                         testing::hf_fixture_name);

// Mixture of experts: an expert sees the tokens routed to it, as in
// transformers. Three prompts in one batch, each invoke reads its own rows
// of an expert (input, output, and the first projection inside it), equal to
// what transformers' expert saw for that prompt alone; the first invoke also
// zeroes its rows of the expert's output, which gives transformers' ablated
// logits for it and leaves the others' logits alone.
class HfFixtureMoe : public ::testing::TestWithParam<HfFixtureCase> {};

TEST_P(HfFixtureMoe, TracesSeeEachRequestsRoutedRowsOfAnExpert) {
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = fixture.arch;
  SafetensorsFile ref(fixture_dir(fixture) + "/reference.safetensors");
  if (!ref.metadata().count("expert")) {
    // Only other checkpoints ($NNSIGHT_MODEL_FIXTURES) can lack it: the script records an expert when it ablates one.
    ASSERT_TRUE(testing::hf_fixture_overridden(fixture)) << "the committed fixture records no expert";
    GTEST_SKIP() << arch << ": this checkpoint's reference ablates no expert";
  }
  const std::string expert = ref.metadata().at("expert");
  const std::string proj = arch == "mixtral" ? "w1" : "gate_proj";
  LanguageModel lm(EngineArgs().model(fixture_dir(fixture)).kv_cache_memory_mb(4).show_progress(false));
  EXPECT_EQ(lm.envoy(expert).type_name(), arch == "mixtral" ? "MixtralBlockSparseTop2MLP" : "Qwen3MoeMLP");
  std::vector<Saved> in(3), out(3), inner(3), logits(3);
  auto res = lm.trace(SamplingParams().temperature(0).max_tokens(1), [&](Tracer& t) {
    for (int s = 0; s < 3; ++s) {
      t.invoke(ints(ref.load("ids." + std::to_string(s))), [&, s] {
        auto e = lm.envoy(expert);
        in[s] = e.input().save();
        inner[s] = e[proj].output().save();
        out[s] = e.output().save();
        if (s == 0) e.output() = e.output() * 0;
        logits[s] = lm.logits().save();
      });
    }
  });
  auto rel = [](const at::Tensor& got, const at::Tensor& want) {
    EXPECT_EQ(got.sizes(), want.sizes());
    if (got.sizes() != want.sizes()) return 1.0;
    if (want.numel() == 0) return 0.0;  // none of this prompt's tokens went to the expert
    return (got - want).abs().max().item<double>() / std::max(want.abs().max().item<double>(), 1e-30);
  };
  for (int s = 0; s < 3; ++s) {
    SCOPED_TRACE("sequence " + std::to_string(s));
    const std::string ss = std::to_string(s);
    EXPECT_LE(rel(res[in[s]], ref.load("expert_in." + ss)), 1e-4);
    EXPECT_LE(rel(res[out[s]], ref.load("expert." + ss)), 1e-4);
    EXPECT_LE(rel(res[inner[s]], ref.load("expert_proj." + ss)), 1e-4);
    const int64_t last = ref.load("ids." + ss).numel() - 1;
    const at::Tensor want = s == 0 ? ref.load("ablation.logits")[last] : ref.load("logits." + ss)[last];
    EXPECT_LE(rel(res[logits[s]][0], want), 1e-4);
  }
}

// The same reads and writes of routed rows at TP=2 (gloo, worker processes):
// the expert's projections are split across ranks; traces see them whole.
class HfFixtureMoeTp : public ::testing::TestWithParam<HfFixtureCase> {};

TEST_P(HfFixtureMoeTp, RoutedRowsAtTwoRanksEqualOne) {
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = fixture.arch;
  SafetensorsFile ref(fixture_dir(fixture) + "/reference.safetensors");
  if (!ref.metadata().count("expert")) {
    ASSERT_TRUE(testing::hf_fixture_overridden(fixture)) << "the committed fixture records no expert";
    GTEST_SKIP() << arch << ": this checkpoint's reference ablates no expert";
  }
  const std::string expert = ref.metadata().at("expert");
  const std::string proj = arch == "mixtral" ? "w1" : "gate_proj";
  auto run = [&](int tp) {
    LanguageModel lm(EngineArgs()
                         .model(fixture_dir(fixture))
                         .kv_cache_memory_mb(4)
                         .show_progress(false)
                         .worker_timeout_s(60)
                         .tensor_parallel_size(tp));
    std::vector<Saved> inner(2), logits(2);
    auto res = lm.trace(SamplingParams().temperature(0).max_tokens(2).ignore_eos(true), [&](Tracer& t) {
      for (int s = 0; s < 2; ++s) {
        t.invoke(ints(ref.load("ids." + std::to_string(s))), [&, s] {
          auto e = lm.envoy(expert);
          inner[s] = e[proj].output().save();
          if (s == 1) e[proj].output() = e[proj].output() * 0.5;
          logits[s] = lm.logits().save();
        });
      }
    });
    std::vector<at::Tensor> out;
    for (int s = 0; s < 2; ++s) {
      out.push_back(res[inner[s]]);
      out.push_back(res[logits[s]]);
    }
    return out;
  };
  const auto one = run(1), two = run(2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].sizes(), two[i].sizes()) << i;
    if (one[i].numel() == 0) continue;
    EXPECT_LE((one[i] - two[i]).abs().max().item<double>(), 1e-4) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HfFixtureMoe,
                         ::testing::ValuesIn(testing::hf_fixtures({"mixtral", "qwen3_moe", "qwen3_moe_gguf"},
                                                                  {"mixtral", "qwen3_moe"})),
                         testing::hf_fixture_name);
INSTANTIATE_TEST_SUITE_P(Models, HfFixtureMoeTp,
                         ::testing::ValuesIn(testing::hf_fixtures({"mixtral", "qwen3_moe"}, {"mixtral", "qwen3_moe"})),
                         testing::hf_fixture_name);

}  // namespace
}  // namespace nnsight
