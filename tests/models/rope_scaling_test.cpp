// YaRN rotary embeddings against transformers' own tables
// (tests/data/rope/yarn.safetensors, scripts/make-rope-fixtures): each
// config.json text is parsed as a checkpoint's would be, and the rotary
// embedding the model would build (for OLMo 3, the full-attention layers'
// and the sliding layers') gives transformers' inverse frequencies and its
// cos/sin tables with the attention factor applied.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nnsight/error.hpp>

#include "core/hf/hf_config.h"
#include "core/safetensors/safetensors_file.h"
#include "models/decoder.h"
#include "support/expect_load_error.h"

namespace nnsight {
namespace {

double max_rel(const at::Tensor& got, const at::Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  if (got.sizes() != want.sizes()) return 1e30;
  return ((got - want).abs() / (want.abs() + 1e-30)).max().item<double>();
}

TEST(RopeScaling, YarnTablesEqualTransformers) {
  SafetensorsFile ref(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/rope/yarn.safetensors");
  int cases = 0;
  for (const auto& [key, text] : ref.metadata()) {
    if (key.rfind("config.", 0) != 0) continue;
    const std::string name = key.substr(7);
    const ModelConfig cfg = parse_hf_config(text, name + "/config.json");
    const bool sliding = ref.metadata().at("layer_type." + name) == "sliding_attention";
    if (name.rfind("olmo3", 0) == 0) ASSERT_GT(cfg.rope_local_theta, 0.0) << name;
    auto rotary = sliding ? make_rotary(cfg, cfg.rope_local_theta, false) : make_rotary(cfg);
    const at::Tensor want_cos = ref.load("cos." + name);  // [positions, rotary_dim / 2]
    const int64_t n = want_cos.size(0);
    // The inverse frequencies are computed in float32 as transformers does:
    // equal to the last bit but for pow's rounding.
    EXPECT_LE(max_rel(rotary->inv_freq(), ref.load("inv_freq." + name)), 1e-6) << name;
    EXPECT_LE((rotary->cos_table().narrow(0, 0, n) - want_cos).abs().max().item<double>(), 2e-6) << name;
    EXPECT_LE((rotary->sin_table().narrow(0, 0, n) - ref.load("sin." + name)).abs().max().item<double>(), 2e-6) << name;
    ++cases;
  }
  EXPECT_EQ(cases, 8);
}

TEST(RopeScaling, YarnSettingsAreReadAndDerivedAsTransformers5) {
  const std::string base = R"("model_type": "qwen3", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16, "max_position_embeddings": 8192)";
  // A null factor: the context ratio (5.x); no attention factor: 0.1 ln(factor) + 1.
  ModelConfig c = parse_hf_config("{" + base + R"(, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0,
          "factor": null, "original_max_position_embeddings": 2048}})",
                                  "q.json");
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1.0);
  EXPECT_EQ(c.rope_scaling.original_max_position, 2048);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1.0);
  // A factor that differs from the ratio is used as given (transformers 5.x and vLLM; 4.x used the ratio).
  c = parse_hf_config("{" + base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2.0,
          "original_max_position_embeddings": 2048}})",
                      "q.json");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);
  // Errors name the field. transformers (4.x and 5.x) requires the factor key.
  testing::expect_load_error(
      [&] {
        parse_hf_config("{" + base + R"(, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0}})", "q.json");
      },
      {"q.json", "missing field 'rope_parameters.factor'"});
  // Two spellings that disagree on what derives the attention factor.
  testing::expect_load_error(
      [&] {
        parse_hf_config("{" + base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "mscale": 1.0,
            "mscale_all_dim": 0.5}, "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "mscale": 1.0,
            "mscale_all_dim": 1.0}})",
                        "q.json");
      },
      {"q.json", "rope_scaling", "rope_parameters", "disagree"});
  testing::expect_load_error(
      [&] { parse_hf_config("{" + base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": -1.0}})", "q.json"); },
      {"q.json", "rope_scaling.factor", "positive"});
  testing::expect_load_error(
      [&] {
        parse_hf_config("{" + base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "extrapolate": 1}})",
                        "q.json");
      },
      {"q.json", "rope_scaling.extrapolate"});
  // Not a rope type Llama's config implements here.
  testing::expect_load_error(
      [&] {
        parse_hf_config(R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}})",
                        "l.json");
      },
      {"l.json", "rope_scaling.rope_type", "yarn", "not implemented"});
}

TEST(RopeScaling, Olmo3RopePerLayerTypeAndWhatTransformers5WouldReadOtherwise) {
  const std::string base = R"("model_type": "olmo3", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 8, "num_attention_heads": 4, "max_position_embeddings": 8192)";
  // Defaults: every 4th layer full, a 4096 window, both bases 500000.
  ModelConfig c = parse_hf_config("{" + base + "}", "o.json");
  EXPECT_EQ(c.architecture, "olmo2");
  EXPECT_EQ(c.model_type, "olmo3");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_local_theta, 500000.0);
  // 4.x's rope_theta other than the default, without a sliding layers' base:
  // transformers 5.x would give the sliding layers 500000, so it is refused.
  testing::expect_load_error([&] { parse_hf_config("{" + base + R"(, "rope_theta": 10000.0})", "o.json"); },
                             {"o.json", "rope_theta", "sliding_attention"});
  // Sliding layers' rope is never scaled.
  testing::expect_load_error(
      [&] {
        parse_hf_config("{" + base + R"(, "rope_parameters": {"full_attention": {"rope_type": "default"},
            "sliding_attention": {"rope_type": "yarn", "factor": 2.0}}})",
                        "o.json");
      },
      {"o.json", "rope_parameters.sliding_attention.rope_type", "yarn"});
  // truncate inside a per-layer-type dict is never read by transformers 5.x,
  // nor in a 4.x rope_scaling it merges into one.
  testing::expect_load_error(
      [&] {
        parse_hf_config("{" + base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "truncate": false}})",
                        "o.json");
      },
      {"o.json", "rope_scaling.truncate"});
  // A null window leaves the default sliding layers without one; with
  // layer_types all full it is what the config says.
  testing::expect_load_error([&] { parse_hf_config("{" + base + R"(, "sliding_window": null})", "o.json"); },
                             {"o.json", "sliding_window", "null"});
  std::string full = "[";
  for (int i = 0; i < 8; ++i) full += std::string(i ? ", " : "") + "\"full_attention\"";
  full += "]";
  c = parse_hf_config("{" + base + R"(, "sliding_window": null, "layer_types": )" + full + "}", "o.json");
  EXPECT_EQ(c.sliding_window, 0);
  for (int64_t i = 0; i < 8; ++i) EXPECT_FALSE(c.layer_slides(i)) << i;
  testing::expect_load_error(
      [&] {
        parse_hf_config("{" + base + R"(, "rope_parameters": {"full_attention": {"rope_type": "yarn",
            "factor": 2.0, "truncate": false}, "sliding_attention": {"rope_type": "default"}}})",
                        "o.json");
      },
      {"o.json", "rope_parameters.full_attention.truncate"});
}

}  // namespace
}  // namespace nnsight
