// The Hugging Face fixtures (tests/data/models/<arch>, see hf_fixture_test.cpp)
// through the whole engine: the scheduler's chunked prefill and mixed
// batches reproduce transformers' greedy continuations, and a trace that
// zeroes a module named by its Hugging Face path gives transformers'
// ablated logits.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include <cstdlib>

#include "core/safetensors/safetensors_file.h"
#include "core/weight_source.h"
#include "support/tiny_engine.h"

namespace nnsight {
namespace {

// $NNSIGHT_MODEL_FIXTURES/<arch> when set (other checkpoints made by the
// same script), else the committed tests/data/models/<arch>.
std::string fixture_dir(const std::string& arch) {
  const char* root = std::getenv("NNSIGHT_MODEL_FIXTURES");
  return (root != nullptr && *root != '\0' ? std::string(root)
                                           : std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/models") +
         "/" + arch;
}

std::vector<int32_t> ints(const at::Tensor& t) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<int32_t>(t[i].item<int64_t>()));
  return out;
}

class HfFixtureEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFixtureEngine, ChunkedMixedBatchesReproduceGreedyContinuations) {
  const std::string arch = GetParam();
  SafetensorsFile ref(fixture_dir(arch) + "/reference.safetensors");
  auto source = open_weights(fixture_dir(arch));
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
  const std::string arch = GetParam();
  SafetensorsFile ref(fixture_dir(arch) + "/reference.safetensors");
  const std::string path = ref.metadata().at("ablate");
  LanguageModel lm(EngineArgs().model(fixture_dir(arch)).kv_cache_memory_mb(4).show_progress(false));
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

INSTANTIATE_TEST_SUITE_P(Models, HfFixtureEngine,
                         ::testing::Values("mistral", "qwen3", "gemma", "gemma2", "gpt_neox", "olmo2", "phi3",
                                           "gemma3_text", "mixtral", "qwen3_moe"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace nnsight
