// parse_hf_config: config.json fields to ModelConfig for each supported
// model_type, defaults, rope scaling, and precise errors; the spellings of
// transformers 4.x and 5.x alike, and both in one file.
#include "core/hf/hf_config.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nnsight/error.hpp>

#include "support/expect_load_error.h"

namespace nnsight {
namespace {

using testing::expect_load_error;

TEST(HfConfig, Llama3WithRopeScaling) {
  ModelConfig c = parse_hf_config(R"({
    "model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
    "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "tie_word_embeddings": true, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
    "mlp_bias": false, "attention_bias": false})",
                                  "cfg.json");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_EQ(c.max_position, 131072);
}

TEST(HfConfig, MistralAndQwen2MapToLlama) {
  const char* base = R"("vocab_size": 100, "hidden_size": 64, "intermediate_size": 128,
                        "num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": null)";
  ModelConfig m = parse_hf_config(std::string("{\"model_type\": \"mistral\", ") + base + "}", "m");
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.num_kv_heads, 8);  // defaults to the head count
  EXPECT_EQ(m.head_dim, 8);      // null means hidden / heads
  EXPECT_EQ(m.rope_theta, 10000.0);
  EXPECT_NEAR(m.norm_eps, 1e-6, 1e-15);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_TRUE(m.attention_out_bias);
  ModelConfig q = parse_hf_config(std::string("{\"model_type\": \"qwen2\", ") + base + "}", "q");
  EXPECT_TRUE(q.attention_bias);
  EXPECT_FALSE(q.attention_out_bias);  // Qwen2's o_proj has no bias
  EXPECT_EQ(q.eos_token_id, -1);
}

// Qwen2.5-0.5B-Instruct's config.json as the hub serves it (written by
// transformers 4.43): its sliding-window fields are present but switched off.
TEST(HfConfig, Qwen25HubConfig) {
  const ModelConfig c = parse_hf_config(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2",
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})",
                                        "qwen2.5-0.5b/config.json");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 14);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window is false
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, 151645);
  expect_load_error(
      [] {
        parse_hf_config(R"({"model_type": "qwen2", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
                            "num_hidden_layers": 2, "num_attention_heads": 2, "use_sliding_window": true})",
                        "q.json");
      },
      {"q.json", "use_sliding_window"});
}

// SmolLM3-3B's config.json as the hub serves it: a NoPE layer every 4th,
// tied head, the window fields switched off.
TEST(HfConfig, SmolLM3HubConfig) {
  std::string nope = "[";
  for (int i = 0; i < 36; ++i) nope += std::string(i ? ", " : "") + ((i + 1) % 4 == 0 ? "0" : "1");
  nope += "]";
  const ModelConfig c = parse_hf_config(R"({
    "architectures": ["SmolLM3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": null, "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 65536,
    "max_window_layers": 28, "mlp_bias": false, "model_type": "smollm3", "no_rope_layer_interval": 4,
    "no_rope_layers": )" + nope + R"(, "num_attention_heads": 16, "num_hidden_layers": 36,
    "num_key_value_heads": 4, "pad_token_id": 128004, "pretraining_tp": 2, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 5000000.0, "sliding_window": null, "torch_dtype": "bfloat16",
    "transformers_version": "4.54.0.dev0", "use_cache": false, "use_sliding_window": false,
    "vocab_size": 128256})",
                                        "smollm3-3b/config.json");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.model_type, "smollm3");
  EXPECT_TRUE(c.tie_word_embeddings);  // SmolLM3's default
  EXPECT_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.head_dim, 128);
  ASSERT_EQ(c.nope_layers.size(), 36u);
  for (int64_t i = 0; i < 36; ++i) EXPECT_EQ(c.layer_rotates(i), (i + 1) % 4 != 0) << i;
  // Without the list: every no_rope_layer_interval-th layer.
  const std::string small = R"("model_type": "smollm3", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
      "num_hidden_layers": 6, "num_attention_heads": 2)";
  const ModelConfig d = parse_hf_config("{" + small + R"(, "no_rope_layer_interval": 3})", "s.json");
  EXPECT_EQ(d.nope_layers, (std::vector<bool>{false, false, true, false, false, true}));
  // The list wins over the interval.
  const ModelConfig e = parse_hf_config(
      "{" + small + R"(, "no_rope_layer_interval": 4, "no_rope_layers": [0, 1, 1, 1, 1, 0]})", "s.json");
  EXPECT_EQ(e.nope_layers, (std::vector<bool>{true, false, false, false, false, true}));
  expect_load_error([&] { parse_hf_config("{" + small + R"(, "no_rope_layers": [1, 1, 2, 1, 1, 0]})", "s.json"); },
                    {"s.json", "no_rope_layers[2]", "2"});
  expect_load_error([&] { parse_hf_config("{" + small + R"(, "no_rope_layers": [1, 0]})", "s.json"); },
                    {"s.json", "no_rope_layers", "6 entries"});
  expect_load_error([&] { parse_hf_config("{" + small + R"(, "use_sliding_window": true})", "s.json"); },
                    {"s.json", "use_sliding_window"});
}

TEST(HfConfig, Gpt2Defaults) {
  ModelConfig c = parse_hf_config(R"({"model_type": "gpt2", "n_inner": null})", "g");
  EXPECT_EQ(c.architecture, "gpt2");
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.max_position, 1024);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_EQ(c.bos_token_id, 50256);
}

TEST(HfConfig, ErrorsNameTheFileAndField) {
  expect_load_error([] { parse_hf_config(R"({"model_type": "bert"})", "c.json"); },
                    {"c.json", "model_type 'bert' is not supported"});
  expect_load_error([] { parse_hf_config(R"({"model_type": "llama"})", "c.json"); },
                    {"c.json", "missing field 'vocab_size'"});
  expect_load_error([] { parse_hf_config(R"({"model_type": "gpt2", "n_embd": "768"})", "c.json"); },
                    {"c.json", "field 'n_embd'", "expected an integer"});
  expect_load_error([] { parse_hf_config(R"({"model_type": "gpt2", "n_embd": 7.5})", "c.json"); },
                    {"field 'n_embd' = 7.5"});
  expect_load_error([] { parse_hf_config(R"({"model_type": "gpt2", "n_head": 5})", "c.json"); },
                    {"c.json", "num_heads = 5", "does not divide hidden_size = 768"});
  expect_load_error(
      [] {
        parse_hf_config(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
                            "num_hidden_layers": 1, "num_attention_heads": 2,
                            "rope_scaling": {"type": "yarn", "factor": 4.0}})",
                        "c.json");
      },
      {"c.json", "field 'rope_scaling.type' = \"yarn\" is not implemented for model_type 'llama'"});
  expect_load_error([] { parse_hf_config("{not json", "c.json"); }, {"c.json", "not valid JSON"});
  expect_load_error([] { parse_hf_config("[]", "c.json"); }, {"c.json", "not a JSON object"});
}

// ---- transformers 5.x spellings ----------------------------------------------

// A small config of `model_type` with `extra` members (JSON, each after a comma).
std::string cfg(const std::string& model_type, const std::string& extra = "", int layers = 2) {
  return R"({"model_type": ")" + model_type + R"(", "vocab_size": 32, "hidden_size": 64, "intermediate_size": 32,
      "num_hidden_layers": )" +
         std::to_string(layers) + R"(, "num_attention_heads": 4, "head_dim": 16)" + extra + "}";
}

TEST(HfConfig, V5DtypeAndFlatRopeParameters) {
  const ModelConfig c = parse_hf_config(cfg("llama", R"(, "dtype": "bfloat16", "transformers_version": "5.24.0",
                      "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0})"),
                                        "c.json");
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "");
  EXPECT_EQ(c.rotary_dim, 0);
  // No rope_theta anywhere: transformers' default for the model type (Mixtral 1e6, others 1e4).
  EXPECT_EQ(parse_hf_config(cfg("mistral", R"(, "rope_parameters": {"rope_type": "default"})"), "c.json").rope_theta,
            10000.0);
  EXPECT_EQ(parse_hf_config(cfg("mixtral"), "c.json").rope_theta, 1e6);
}

TEST(HfConfig, V5Llama3RopeParametersReadLikeRopeScaling) {
  const std::string llama3 = R"("rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192)";
  const ModelConfig v5 =
      parse_hf_config(cfg("llama", R"(, "rope_parameters": {"rope_theta": 500000.0, )" + llama3 + "}"), "c.json");
  const ModelConfig v4 =
      parse_hf_config(cfg("llama", R"(, "rope_theta": 500000.0, "rope_scaling": {)" + llama3 + "}"), "c.json");
  for (const ModelConfig* c : {&v5, &v4}) {
    EXPECT_EQ(c->rope_theta, 500000.0);
    EXPECT_EQ(c->rope_scaling.type, "llama3");
    EXPECT_EQ(c->rope_scaling.factor, 8.0);
    EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c->rope_scaling.original_max_position, 8192);
  }
  // Both spellings in one file, agreeing.
  const ModelConfig both =
      parse_hf_config(cfg("llama", R"(, "rope_theta": 500000.0, "rope_scaling": {)" + llama3 +
                                       R"(}, "rope_parameters": {"rope_theta": 500000.0, )" + llama3 + "}"),
                      "c.json");
  EXPECT_EQ(both.rope_scaling.factor, 8.0);
}

TEST(HfConfig, BothSpellingsMustAgree) {
  expect_load_error(
      [] {
        parse_hf_config(cfg("llama", R"(, "rope_theta": 10000.0, "rope_parameters": {"rope_theta": 500000.0})"),
                        "c.json");
      },
      {"c.json", "fields 'rope_theta' = 10000.0 and 'rope_parameters.rope_theta' = 500000.0 disagree"});
  expect_load_error(
      [] {
        parse_hf_config(cfg("llama", R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                         "original_max_position_embeddings": 8192},
                                       "rope_parameters": {"rope_type": "llama3", "factor": 4.0,
                                         "original_max_position_embeddings": 8192})"),
                        "c.json");
      },
      {"c.json",
       "fields 'rope_scaling' (type llama3, factor 8.0) and 'rope_parameters' (type llama3, factor 4.0) "
       "disagree"});
  expect_load_error(
      [] { parse_hf_config(cfg("llama", R"(, "torch_dtype": "float32", "dtype": "bfloat16")"), "c.json"); },
      {"fields 'torch_dtype' = \"float32\" and 'dtype' = \"bfloat16\" disagree"});
  EXPECT_NO_THROW(parse_hf_config(cfg("llama", R"(, "torch_dtype": "bfloat16", "dtype": "bfloat16")"), "c.json"));
  expect_load_error(
      [] {
        parse_hf_config(
            cfg("llama", R"(, "rope_parameters": {"rope_type": "default", "type": "linear", "factor": 2.0})"),
            "c.json");
      },
      {"fields 'rope_parameters.rope_type' = \"default\" and 'rope_parameters.type' = \"linear\" disagree"});
  expect_load_error(
      [] { parse_hf_config(cfg("qwen3_moe", R"(, "num_experts": 8, "num_local_experts": 4)"), "c.json"); },
      {"fields 'num_experts' = 8 and 'num_local_experts' = 4 disagree"});
}

TEST(HfConfig, V5RopeTypesTheModelTypeDoesNotImplementAreRefusedNamingTheField) {
  expect_load_error(
      [] {
        parse_hf_config(cfg("llama", R"(, "rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                                         "original_max_position_embeddings": 4096})"),
                        "c.json");
      },
      {"c.json", "field 'rope_parameters.rope_type' = \"yarn\" is not implemented for model_type 'llama'",
       "default, llama3"});
  expect_load_error(
      [] { parse_hf_config(cfg("qwen3", R"(, "rope_parameters": {"rope_type": "linear", "factor": 2.0})"), "c.json"); },
      {"field 'rope_parameters.rope_type' = \"linear\" is not implemented for model_type 'qwen3'"});
  // A key the rope type does not read is not ignored.
  expect_load_error(
      [] {
        parse_hf_config(cfg("qwen2", R"(, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 2, 4]})"),
                        "c.json");
      },
      {"field 'rope_parameters.mrope_section' = [2,2,4] is not implemented for rope_type 'default' of model_type "
       "'qwen2'"});
  // Partial rotary is implemented for GPT-NeoX and Phi-3 only.
  expect_load_error(
      [] {
        parse_hf_config(cfg("llama", R"(, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5})"),
                        "c.json");
      },
      {"field 'rope_parameters.partial_rotary_factor' = 0.5 is not implemented for model_type 'llama'"});
  EXPECT_NO_THROW(parse_hf_config(
      cfg("llama", R"(, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 1.0})"), "c.json"));
}

TEST(HfConfig, V5PartialRotaryFactorInRopeParameters) {
  const ModelConfig neox = parse_hf_config(R"({"model_type": "gpt_neox", "vocab_size": 32, "hidden_size": 64,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "default", "rope_theta": 20000, "partial_rotary_factor": 0.5}})",
                                           "n.json");
  EXPECT_EQ(neox.rotary_dim, 8);
  EXPECT_EQ(neox.rope_theta, 20000.0);
  // 4.x's spellings of the same, and a disagreement between them and 5.x's.
  const ModelConfig neox4 = parse_hf_config(R"({"model_type": "gpt_neox", "vocab_size": 32, "hidden_size": 64,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "rotary_pct": 0.5,
      "rotary_emb_base": 20000, "partial_rotary_factor": 0.5, "rope_theta": 20000})",
                                            "n.json");
  EXPECT_EQ(neox4.rotary_dim, 8);
  EXPECT_EQ(neox4.rope_theta, 20000.0);
  expect_load_error(
      [] {
        parse_hf_config(R"({"model_type": "gpt_neox", "vocab_size": 32, "hidden_size": 64, "intermediate_size": 32,
            "num_hidden_layers": 1, "num_attention_heads": 4, "rotary_pct": 0.25,
            "rope_parameters": {"partial_rotary_factor": 0.5}})",
                        "n.json");
      },
      {"fields 'rotary_pct' = 0.25 and 'rope_parameters.partial_rotary_factor' = 0.5 disagree"});
  const ModelConfig phi3 =
      parse_hf_config(cfg("phi3", R"(, "max_position_embeddings": 128, "original_max_position_embeddings": 64,
          "rope_parameters": {"rope_type": "longrope", "type": "longrope", "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5, "original_max_position_embeddings": 64,
            "short_factor": [1.0, 1.1, 1.2, 1.3], "long_factor": [1.0, 2.0, 3.0, 4.0]})",
                          1),
                      "p.json");
  EXPECT_EQ(phi3.rotary_dim, 8);
  EXPECT_EQ(phi3.rope_scaling.type, "longrope");
  EXPECT_EQ(phi3.rope_scaling.original_max_position, 64);
  EXPECT_EQ(phi3.rope_scaling.short_factor.size(), 4u);
  EXPECT_NEAR(phi3.rope_scaling.attention_factor, std::sqrt(1.0 + std::log(2.0) / std::log(64.0)), 1e-12);
  expect_load_error(
      [] {
        parse_hf_config(cfg("phi3", R"(, "max_position_embeddings": 128, "original_max_position_embeddings": 64,
            "rope_parameters": {"rope_type": "longrope", "original_max_position_embeddings": 32,
              "short_factor": [1, 1, 1, 1, 1, 1, 1, 1], "long_factor": [1, 1, 1, 1, 1, 1, 1, 1]})"),
                        "p.json");
      },
      {"fields 'original_max_position_embeddings' = 64 and 'rope_parameters.original_max_position_embeddings' = 32 "
       "disagree"});
  expect_load_error(
      [] {
        parse_hf_config(cfg("phi3", R"(, "max_position_embeddings": 128, "original_max_position_embeddings": 64,
            "rope_parameters": {"rope_type": "longrope", "factor": 4.0,
              "short_factor": [1, 1, 1, 1, 1, 1, 1, 1], "long_factor": [1, 1, 1, 1, 1, 1, 1, 1]})"),
                        "p.json");
      },
      {"field 'rope_parameters.factor' = 4.0 is not implemented for phi3"});
}

TEST(HfConfig, V5Gemma3PerLayerTypeRopeParametersAndLayerTypes) {
  const std::string rope = R"(, "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})";
  const ModelConfig g =
      parse_hf_config(cfg("gemma3_text", rope + R"(, "sliding_window": 512, "use_bidirectional_attention": false,
          "layer_types": ["full_attention", "sliding_attention", "sliding_attention"])",
                          3),
                      "g.json");
  EXPECT_EQ(g.rope_theta, 1e6);
  EXPECT_EQ(g.rope_scaling.type, "linear");
  EXPECT_EQ(g.rope_scaling.factor, 8.0);
  EXPECT_EQ(g.rope_local_theta, 10000.0);
  EXPECT_EQ(g.sliding_window, 512);
  EXPECT_FALSE(g.layer_slides(0));
  EXPECT_TRUE(g.layer_slides(1));
  EXPECT_TRUE(g.layer_slides(2));
  // With the 4.x pattern beside it, the two must agree.
  EXPECT_NO_THROW(
      parse_hf_config(cfg("gemma3_text", rope + R"(, "sliding_window_pattern": 2, "layer_types": ["sliding_attention",
          "full_attention", "sliding_attention"])",
                          3),
                      "g.json"));
  expect_load_error(
      [&] {
        parse_hf_config(cfg("gemma3_text", rope + R"(, "sliding_window_pattern": 2, "layer_types": ["full_attention",
            "sliding_attention", "sliding_attention"])",
                            3),
                        "g.json");
      },
      {"fields 'sliding_window_pattern' = 2 and 'layer_types' = [full_attention, sliding_attention, "
       "sliding_attention] disagree"});
  // 4.x's rope_local_base_freq against the sliding layers' dict.
  expect_load_error(
      [&] { parse_hf_config(cfg("gemma3_text", rope + R"(, "rope_local_base_freq": 20000.0)"), "g.json"); },
      {"fields 'rope_local_base_freq' = 20000.0 and 'rope_parameters.sliding_attention.rope_theta' = 10000.0 "
       "disagree"});
  // Local layers turn unscaled in the engine.
  expect_load_error(
      [] {
        parse_hf_config(cfg("gemma3_text", R"(, "rope_parameters": {
            "sliding_attention": {"rope_type": "linear", "factor": 2.0}})"),
                        "g.json");
      },
      {"field 'rope_parameters.sliding_attention.rope_type' = \"linear\" is not implemented for model_type "
       "'gemma3_text'"});
  // A flat dict is not Gemma 3's 5.x spelling.
  expect_load_error(
      [] { parse_hf_config(cfg("gemma3_text", R"(, "rope_parameters": {"rope_theta": 10000.0})"), "g.json"); },
      {"field 'rope_parameters.rope_theta' = 10000.0 is not implemented for model_type 'gemma3_text'",
       "one dict per layer type"});
}

// google/gemma-3-4b-it's config.json as the hub has it (written by
// transformers 4.50): a multimodal wrapper whose text_config gives only what
// differs from Gemma3TextConfig's defaults. The engine serves its text
// model with Gemma 3 4B's published shape (34 layers of 2560, 8 heads of
// 256, 4 KV heads, every 6th layer global with rope 1e6 scaled 8x linearly,
// the others a 1024 window at rope 10000).
TEST(HfConfig, Gemma3MultimodalHubConfigServesItsTextModel) {
  const std::string hub = R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": false}})";
  const ModelConfig c = parse_hf_config(hub, "gemma-3-4b-it/config.json");
  EXPECT_EQ(c.architecture, "gemma3_text");
  EXPECT_EQ(c.multimodal, "gemma3");
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.intermediate_size, 10240);
  EXPECT_EQ(c.num_layers, 34);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.max_position, 131072);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_local_theta, 10000.0);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.attn_logit_softcap, 0.0);
  EXPECT_EQ(c.final_logit_softcap, 0.0);
  for (int64_t l = 0; l < 34; ++l) EXPECT_EQ(c.layer_slides(l), (l + 1) % 6 != 0) << "layer " << l;
  EXPECT_TRUE(c.is_eos(106)) << "<end_of_turn>, the wrapper's eos list";
}

// An eos list: the first is eos_token_id, every one ends a sequence.
TEST(HfConfig, EveryIdOfAnEosListEndsASequence) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 16,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
      "eos_token_id": [128001, 128008, 128009]})",
                                        "llama3.json");
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_TRUE(c.is_eos(128001) && c.is_eos(128008) && c.is_eos(128009));
  EXPECT_FALSE(c.is_eos(5));
  expect_load_error(
      [] {
        parse_hf_config(R"({"model_type": "llama", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
            "num_hidden_layers": 1, "num_attention_heads": 2, "eos_token_id": [2, 40]})",
                        "c.json");
      },
      {"c.json", "more_eos_token_ids", "40"});
  expect_load_error(
      [] {
        parse_hf_config(R"({"model_type": "llama", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
            "num_hidden_layers": 1, "num_attention_heads": 2, "eos_token_id": [2, -5]})",
                        "c.json");
      },
      {"c.json", "field 'eos_token_id' = [2,-5]"});
}

TEST(HfConfig, Gemma3MultimodalErrorsNameTheField) {
  expect_load_error([] { parse_hf_config(R"({"model_type": "gemma3"})", "m.json"); },
                    {"m.json", "model_type 'gemma3' needs a 'text_config' object"});
  expect_load_error(
      [] { parse_hf_config(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma2"}})", "m.json"); },
      {"m.json", "field 'text_config.model_type' = \"gemma2\" is not supported for model_type 'gemma3'"});
  expect_load_error(
      [] {
        parse_hf_config(R"({"model_type": "gemma3", "tie_word_embeddings": false,
                            "text_config": {"tie_word_embeddings": true}})",
                        "m.json");
      },
      {"fields 'tie_word_embeddings' = false and 'text_config.tie_word_embeddings' = true disagree"});
  // A text model field the engine does not implement is refused, as for gemma3_text.
  expect_load_error(
      [] { parse_hf_config(R"({"model_type": "gemma3", "text_config": {"attn_logit_softcapping": 50.0}})", "m.json"); },
      {"m.json (text_config)", "'attn_logit_softcapping' is set"});
  expect_load_error([] { parse_hf_config(R"({"model_type": "gemma3", "text_config": {"frobnicate": 3}})", "m.json"); },
                    {"m.json (text_config)", "field 'frobnicate' = 3 is not implemented for model_type 'gemma3_text'"});
  // ... and so is a wrapper field that is neither the image side's nor bookkeeping.
  expect_load_error(
      [] { parse_hf_config(R"({"model_type": "gemma3", "text_config": {}, "frobnicate": 3})", "m.json"); },
      {"m.json", "field 'frobnicate' = 3 is not implemented for model_type 'gemma3'"});
}

TEST(HfConfig, V5LayerTypesMustBeWhatTheEngineImplements) {
  // Gemma 2: any pattern of the two types.
  const ModelConfig g2 = parse_hf_config(
      cfg("gemma2", R"(, "sliding_window": 8, "layer_types": ["full_attention", "sliding_attention"])"), "g.json");
  EXPECT_FALSE(g2.layer_slides(0));
  EXPECT_TRUE(g2.layer_slides(1));
  // Qwen: all full is what use_sliding_window false means; a sliding layer is not implemented.
  const std::string qwen_full = R"(, "use_sliding_window": false, "sliding_window": null, "max_window_layers": 28,
      "layer_types": ["full_attention", "full_attention"])";
  for (const char* t : {"qwen2", "qwen3", "qwen3_moe"}) {
    SCOPED_TRACE(t);
    EXPECT_FALSE(parse_hf_config(cfg(t, qwen_full), "q.json").layer_slides(1));
  }
  expect_load_error(
      [] {
        parse_hf_config(cfg("qwen3", R"(, "sliding_window": 4096, "layer_types": ["full_attention",
            "sliding_attention"])"),
                        "q.json");
      },
      {"q.json", "field 'layer_types' = [full_attention, sliding_attention] is not implemented for model_type 'qwen3'",
       "layer 1 is sliding_attention"});
  // Mistral: every layer slides when there is a window, none when there is none.
  EXPECT_TRUE(parse_hf_config(cfg("mistral", R"(, "sliding_window": 8,
      "layer_types": ["sliding_attention", "sliding_attention"])"),
                              "m.json")
                  .layer_slides(1));
  EXPECT_NO_THROW(parse_hf_config(cfg("llama", R"(, "layer_types": ["full_attention", "full_attention"])"), "l.json"));
  expect_load_error(
      [] {
        parse_hf_config(cfg("mistral", R"(, "sliding_window": 8, "layer_types": ["sliding_attention",
            "full_attention"])"),
                        "m.json");
      },
      {"layer 1 is full_attention"});
  expect_load_error([] { parse_hf_config(cfg("gemma2", R"(, "layer_types": ["full_attention"])"), "g.json"); },
                    {"g.json", "field 'layer_types' has 1 entries for 2 layers"});
  expect_load_error(
      [] { parse_hf_config(cfg("gemma2", R"(, "layer_types": ["full_attention", "chunked_attention"])"), "g.json"); },
      {"field 'layer_types[1]' = \"chunked_attention\" is not implemented for model_type 'gemma2'"});
  expect_load_error(
      [] {
        parse_hf_config(cfg("gemma2", R"(, "sliding_window": 0, "layer_types": ["full_attention",
            "sliding_attention"])"),
                        "g.json");
      },
      {"field 'layer_types' has sliding layers but 'sliding_window' is not set"});
}

TEST(HfConfig, V5FieldsAtTheirDefaultsLoadOtherValuesAreRefused) {
  for (const char* t : {"gemma", "gemma2", "gemma3_text"}) {
    SCOPED_TRACE(t);
    EXPECT_NO_THROW(parse_hf_config(cfg(t, R"(, "use_bidirectional_attention": false)"), "g.json"));
    EXPECT_NO_THROW(parse_hf_config(cfg(t, R"(, "use_bidirectional_attention": null)"), "g.json"));
    expect_load_error([&] { parse_hf_config(cfg(t, R"(, "use_bidirectional_attention": true)"), "g.json"); },
                      {"g.json", "field 'use_bidirectional_attention' = true is not implemented for model_type '" +
                                     std::string(t) + "'"});
  }
  // Not read for Llama: any value is refused, naming it.
  expect_load_error([] { parse_hf_config(cfg("llama", R"(, "use_bidirectional_attention": false)"), "l.json"); },
                    {"field 'use_bidirectional_attention' = false is not implemented for model_type 'llama'"});
  const ModelConfig moe =
      parse_hf_config(cfg("qwen3_moe", R"(, "num_local_experts": 4, "num_experts_per_tok": 2)"), "q.json");
  EXPECT_EQ(moe.num_experts, 4);
}

}  // namespace
}  // namespace nnsight
