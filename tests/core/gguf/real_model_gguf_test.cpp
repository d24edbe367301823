// RealModelGguf: the default model (SmolLM2-135M-Instruct, Q4_1) through the
// GGUF loader: config and tokenizer facts, and dequantized rows against
// golden values from the reference Python `gguf` package
// (tests/data/gguf/make_real_model_golden.py).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "core/gguf/gguf_weights.h"
#include "support/real_model.h"

namespace nnsight {
namespace {

class RealModelGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::default_model_path();
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) weights_ = new GgufWeights(path);
  }
  static void TearDownTestSuite() {
    delete weights_;
    weights_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(weights_, nullptr) << "default model not found at " << testing::default_model_path()
                                 << " (set NNSIGHT_HOME or run the setup script)";
  }
  static nlohmann::json golden() {
    std::ifstream in(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/gguf/real_model_golden.json");
    EXPECT_TRUE(in) << "missing tests/data/gguf/real_model_golden.json";
    return nlohmann::json::parse(in);
  }
  static void expect_row(const at::Tensor& row, const nlohmann::json& want, const std::string& what) {
    std::vector<double> w = want.get<std::vector<double>>();
    ASSERT_EQ(row.numel(), static_cast<int64_t>(w.size())) << what;
    at::Tensor r = row.contiguous();
    const float* p = r.data_ptr<float>();
    int bad = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      if (std::fabs(p[i] - w[i]) > 1e-6 * std::max(1.0, std::fabs(w[i])) && ++bad <= 3) {
        ADD_FAILURE() << what << "[" << i << "] = " << p[i] << ", golden " << w[i];
      }
    }
    EXPECT_EQ(bad, 0) << what;
  }
  static GgufWeights* weights_;
};

GgufWeights* RealModelGguf::weights_ = nullptr;

TEST_F(RealModelGguf, ConfigMatchesTheModelCard) {
  const ModelConfig& c = weights_->config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.rope_theta, 100000.0);
  EXPECT_NEAR(c.norm_eps, 1e-5, 1e-10);
  EXPECT_EQ(c.max_position, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.rope_scaling.factor, 0.0);
  // 30 layers x 9 tensors + embedding + final norm + tied lm_head.
  EXPECT_EQ(weights_->names().size(), 30u * 9u + 3u);
  EXPECT_EQ(weights_->shape("model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{192, 576}));
  EXPECT_EQ(weights_->shape("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{576, 1536}));
  EXPECT_EQ(weights_->shape("lm_head.weight"), (std::vector<int64_t>{49152, 576}));
}

TEST_F(RealModelGguf, TokenizerSpecSizes) {
  TokenizerSpec s = weights_->tokenizer_spec();
  EXPECT_EQ(s.tokens.size(), 49152u);
  EXPECT_EQ(s.merges.size(), 48900u);
  EXPECT_EQ(s.token_types.size(), 49152u);
  EXPECT_EQ(s.pre, "smollm");
  EXPECT_EQ(s.bos_id, 1);
  EXPECT_EQ(s.eos_id, 2);
  EXPECT_EQ(s.unk_id, 0);
  EXPECT_EQ(s.pad_id, 2);
  EXPECT_FALSE(s.add_bos);  // the file says tokenizer.ggml.add_bos_token = false
  EXPECT_EQ(s.tokens[1], "<|im_start|>");
  EXPECT_EQ(s.token_types[1], 3);  // control
}

TEST_F(RealModelGguf, StoredRowsMatchThePythonReference) {
  nlohmann::json g = golden();
  const GgufFile& f = weights_->file();
  for (auto& [name, entry] : g["gguf_rows"].items()) {
    const GgufTensorInfo& info = f.tensor(name);
    EXPECT_EQ(ggml_type_name(info.type), entry["type"].get<std::string>());
    for (auto& [row, values] : entry["rows"].items()) {
      at::Tensor r = f.dequantize_rows(info, std::stoll(row), 1);
      expect_row(r, values, name + " row " + row);
    }
  }
}

TEST_F(RealModelGguf, LoadedQAndKAreInHuggingFaceRowOrder) {
  nlohmann::json g = golden();
  const std::pair<std::string, std::string> hf_names[] = {
      {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight"}};
  for (const auto& [gguf, hf] : hf_names) {
    const nlohmann::json& entry = g["hf_rows"][gguf];
    at::Tensor full = weights_->load(hf);
    for (auto& [row, values] : entry["rows"].items()) {
      const int64_t r = std::stoll(row);
      expect_row(full[r], values, hf + " row " + row);
      // A single-row tensor-parallel slice gives the same row.
      expect_row(weights_->load(hf, ShardSlice::rows(r, 1))[0], values, hf + " sliced row " + row);
    }
  }
  // Embedding rows through the Hugging Face name, and the tied head.
  const nlohmann::json& embd = g["gguf_rows"]["token_embd.weight"]["rows"];
  expect_row(weights_->load("model.embed_tokens.weight", ShardSlice::rows(49151, 1))[0], embd["49151"],
             "embed_tokens row 49151");
  expect_row(weights_->load("lm_head.weight", ShardSlice::rows(1, 1))[0], embd["1"], "lm_head row 1");
}

TEST_F(RealModelGguf, LoadsEveryTensor) {
  auto t0 = std::chrono::steady_clock::now();
  double checksum = 0;
  int64_t elements = 0;
  for (const std::string& name : weights_->names()) {
    if (name == "lm_head.weight") continue;  // same data as the embedding
    at::Tensor t = weights_->load(name);
    elements += t.numel();
    checksum += t.abs().sum().item<double>();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(elements, 134515008);  // SmolLM2-135M's parameter count without the tied head
  EXPECT_TRUE(std::isfinite(checksum));
  std::printf("[ RealModelGguf ] loaded %lld weights in %.3f s\n", static_cast<long long>(elements), secs);
  // Speed is a benchmark's business (docs/benchmarks.md), not an assertion
  // here: on a loaded machine any bound is either loose or flaky.
}

}  // namespace
}  // namespace nnsight
