// ModelConfig: the architecture hyper-parameters, read from GGUF metadata or
// a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>

namespace nnsight {

// Llama-3 style frequency scaling ("rope_type": "llama3"); factor 0 = none.
struct RopeScaling {
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

struct ModelConfig {
  std::string architecture;      // "llama" or "gpt2"
  std::string name;              // free text for logs
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;      // == num_heads without GQA
  int64_t head_dim = 0;          // usually hidden_size / num_heads
  int64_t max_position = 2048;   // context length
  double norm_eps = 1e-5;        // RMSNorm (llama) or LayerNorm (gpt2) epsilon
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;   // q/k/v/o biases (llama variants such as Qwen use them)
  bool mlp_bias = false;
  std::string hidden_act = "silu";  // llama: silu; gpt2: gelu_new
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;

  // Throws ConfigError naming the first inconsistent field.
  void validate() const;
};

}  // namespace nnsight
