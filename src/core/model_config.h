// ModelConfig: the architecture hyper-parameters, read from GGUF metadata or
// a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {

// Rotary frequency scaling. type "" with factor 0 = none; "llama3" (Llama 3: factor,
// low/high_freq_factor, original_max_position); "longrope" (Phi-3:
// per-frequency short/long factors, chosen by the context length, and an
// attention factor on cos/sin); "linear" (positions divided by factor);
// "yarn" (YaRN: frequencies below the beta_slow..beta_fast band divided by
// factor, above it kept, a linear ramp between; cos/sin times the attention
// factor).
struct RopeScaling {
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  std::string type;
  std::vector<double> short_factor, long_factor;  // longrope: [rotary_dim / 2] each
  double attention_factor = 0.0;                  // longrope: 0 = derived from factor; yarn: as given or derived
  double beta_fast = 32.0;                        // yarn: rotations where extrapolation ends
  double beta_slow = 1.0;                         // yarn: rotations where interpolation begins
  bool truncate = true;                           // yarn: the band's ends rounded outward to whole dimensions

  // Llama 3 scaling (type "llama3", or a factor with no type: what GGUF files give).
  bool is_llama3() const { return factor != 0.0 && (type.empty() || type == "llama3"); }
};

// The architectures the engine implements (ModelConfig::architecture). The
// Hugging Face model_types llama, mistral and qwen2 are "llama".
const std::vector<std::string>& supported_architectures();

struct ModelConfig {
  std::string architecture;  // one of supported_architectures()
  // The checkpoint's Hugging Face model_type where several share one
  // architecture ("mistral", "qwen2" run as "llama"): the modules take its
  // class names (Qwen2Attention) as transformers' do. "" = architecture's.
  std::string model_type;
  std::string name;  // free text for logs
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;     // == num_heads without GQA
  int64_t head_dim = 0;         // usually hidden_size / num_heads
  int64_t max_position = 2048;  // context length
  double norm_eps = 1e-5;       // RMSNorm (llama) or LayerNorm (gpt2) epsilon
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;     // q/k/v/o biases (llama variants such as Qwen use them)
  bool attention_out_bias = true;  // with attention_bias, o_proj's too (Qwen2: q/k/v only)
  bool mlp_bias = false;
  std::string hidden_act = "silu";  // llama: silu; gpt2: gelu_new
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  // Further ids that end a sequence as eos_token_id does: the rest of
  // config.json's eos list and generation_config.json's (Llama 3 Instruct's
  // <|eot_id|>, Gemma's <end_of_turn>), GGUF's end-of-turn id.
  std::vector<int64_t> more_eos_token_ids;
  // The multimodal model whose text model this is ("gemma3": a
  // Gemma3ForConditionalGeneration checkpoint, served as its language model
  // under model.language_model, without the vision tower); "" for text models.
  std::string multimodal;

  // ---- features of the newer architectures (defaults: off) ----
  // Sliding-window attention: a layer whose sliding_layers entry is true
  // attends to the last `sliding_window` positions (itself included); an
  // empty sliding_layers with a window means every layer slides (Mistral).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;
  std::vector<bool> nope_layers;       // SmolLM3: layers without a rotary embedding (empty = none)
  double rope_local_theta = 0.0;       // Gemma 3: rope base of sliding layers (0: rope_theta)
  int64_t rotary_dim = 0;              // rotated features per head (GPT-NeoX rotary_pct); 0 = head_dim
  double attn_logit_softcap = 0.0;     // Gemma 2: cap * tanh(score / cap); 0 = off
  double final_logit_softcap = 0.0;    // Gemma 2: on the logits; 0 = off
  double query_pre_attn_scalar = 0.0;  // Gemma 2/3: softmax scale is its -1/2 power; 0 = head_dim
  bool parallel_residual = false;      // GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x))
  int64_t num_experts = 0;             // Mixtral: experts per layer (0 = dense MLP)
  int64_t num_experts_per_token = 0;   // Mixtral: top-k
  int64_t moe_intermediate_size = 0;   // Qwen3-MoE: each expert's MLP width (0 = intermediate_size)
  bool norm_topk_prob = true;          // renormalize the top-k routing weights (Mixtral: always)
  std::vector<bool> moe_layers;        // Qwen3-MoE: which layers are sparse (empty = all, with experts)

  // Whether `token` ends a sequence (eos_token_id or one of the others).
  bool is_eos(int64_t token) const {
    if (token == eos_token_id && token >= 0) return true;
    for (int64_t id : more_eos_token_ids)
      if (id == token) return true;
    return false;
  }
  // Adds `id` to the ids that end a sequence (the first one becomes eos_token_id).
  void add_eos_token_id(int64_t id) {
    if (id < 0 || is_eos(id)) return;
    if (eos_token_id < 0)
      eos_token_id = id;
    else
      more_eos_token_ids.push_back(id);
  }

  // True when `layer`'s feed-forward is a mixture of experts.
  bool layer_is_moe(int64_t layer) const {
    if (num_experts <= 0) return false;
    if (moe_layers.empty()) return true;
    return layer >= 0 && layer < static_cast<int64_t>(moe_layers.size()) && moe_layers[layer];
  }

  // True when `layer` attends through the sliding window.
  bool layer_slides(int64_t layer) const {
    if (sliding_window <= 0) return false;
    if (sliding_layers.empty()) return true;
    return layer >= 0 && layer < static_cast<int64_t>(sliding_layers.size()) && sliding_layers[layer];
  }

  // True when `layer` rotates its queries and keys (all but SmolLM3's NoPE layers).
  bool layer_rotates(int64_t layer) const {
    return nope_layers.empty() || layer < 0 || layer >= static_cast<int64_t>(nope_layers.size()) ||
           !nope_layers[static_cast<size_t>(layer)];
  }

  // Throws ConfigError naming the first inconsistent field.
  void validate() const;
};

}  // namespace nnsight
