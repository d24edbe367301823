// parse_hf_config: config.json fields to ModelConfig for each supported
// model_type, defaults, rope scaling, and precise errors.
#include "core/hf/hf_config.h"

#include <gtest/gtest.h>

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
  ModelConfig q = parse_hf_config(std::string("{\"model_type\": \"qwen2\", ") + base + "}", "q");
  EXPECT_TRUE(q.attention_bias);
  EXPECT_EQ(q.eos_token_id, -1);
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
      {"c.json", "rope_scaling type 'yarn' is not supported"});
  expect_load_error([] { parse_hf_config("{not json", "c.json"); }, {"c.json", "not valid JSON"});
  expect_load_error([] { parse_hf_config("[]", "c.json"); }, {"c.json", "not a JSON object"});
}

}  // namespace
}  // namespace nnsight
