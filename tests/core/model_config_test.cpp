// ModelConfig::validate names the first bad field.
#include "core/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

ModelConfig smollm() {
  ModelConfig c;
  c.architecture = "llama";
  c.name = "smol";
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.rope_theta = 100000;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

void expect_config_error(const std::function<void(ModelConfig&)>& mutate, const std::string& fragment) {
  ModelConfig c = smollm();
  mutate(c);
  try {
    c.validate();
    ADD_FAILURE() << "no ConfigError for " << fragment;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("smol"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ValidConfigsPass) {
  EXPECT_NO_THROW(smollm().validate());
  ModelConfig g = smollm();
  g.architecture = "gpt2";
  g.num_heads = g.num_kv_heads = 12;
  g.hidden_size = 768;
  g.head_dim = 64;
  EXPECT_NO_THROW(g.validate());
  ModelConfig none = smollm();
  none.bos_token_id = none.eos_token_id = -1;
  EXPECT_NO_THROW(none.validate());
}

TEST(ModelConfig, EachBadFieldIsNamed) {
  expect_config_error([](ModelConfig& c) { c.architecture = "bert"; }, "architecture = 'bert'");
  expect_config_error([](ModelConfig& c) { c.vocab_size = 0; }, "vocab_size = 0, must be positive");
  expect_config_error([](ModelConfig& c) { c.hidden_size = -576; }, "hidden_size = -576");
  expect_config_error([](ModelConfig& c) { c.intermediate_size = 0; }, "intermediate_size = 0");
  expect_config_error([](ModelConfig& c) { c.num_layers = 0; }, "num_layers = 0");
  expect_config_error([](ModelConfig& c) { c.num_heads = 0; }, "num_heads = 0");
  expect_config_error([](ModelConfig& c) { c.num_kv_heads = 0; }, "num_kv_heads = 0");
  expect_config_error([](ModelConfig& c) { c.head_dim = 0; }, "head_dim = 0");
  expect_config_error([](ModelConfig& c) { c.max_position = 0; }, "max_position = 0");
  expect_config_error([](ModelConfig& c) { c.num_heads = 7; }, "num_heads = 7 does not divide hidden_size = 576");
  expect_config_error([](ModelConfig& c) { c.num_kv_heads = 2; }, "num_kv_heads = 2 does not divide num_heads = 9");
  expect_config_error([](ModelConfig& c) { c.head_dim = 63; }, "head_dim = 63 is odd");
  expect_config_error(
      [](ModelConfig& c) {
        c.architecture = "gpt2";
        c.head_dim = 32;
      },
      "head_dim = 32");
  expect_config_error([](ModelConfig& c) { c.norm_eps = 0; }, "norm_eps");
  expect_config_error([](ModelConfig& c) { c.norm_eps = std::nan(""); }, "norm_eps");
  expect_config_error([](ModelConfig& c) { c.rope_theta = -1; }, "rope_theta");
  expect_config_error([](ModelConfig& c) { c.rope_scaling.factor = -2; }, "rope_scaling.factor");
  expect_config_error(
      [](ModelConfig& c) {
        c.rope_scaling.factor = 8;
        c.rope_scaling.high_freq_factor = 0.5;
      },
      "rope_scaling.high_freq_factor");
  expect_config_error(
      [](ModelConfig& c) {
        c.rope_scaling.factor = 8;
        c.rope_scaling.original_max_position = 0;
      },
      "rope_scaling.original_max_position = 0");
  expect_config_error([](ModelConfig& c) { c.hidden_act.clear(); }, "hidden_act is empty");
  expect_config_error([](ModelConfig& c) { c.bos_token_id = 49152; }, "bos_token_id = 49152 is outside");
  expect_config_error([](ModelConfig& c) { c.eos_token_id = -5; }, "eos_token_id = -5");
}

}  // namespace
}  // namespace nnsight
