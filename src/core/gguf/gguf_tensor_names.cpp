#include "core/gguf/gguf_tensor_names.h"

#include <cctype>

#include <absl/strings/match.h>
#include <cstring>

namespace nnsight {
namespace {

struct NamePair {
  const char* gguf;
  const char* hf;
};

// Per-layer stems ("blk.N.<stem>.weight").
constexpr NamePair kLlamaLayer[] = {
    {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},   {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"},    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},       {"attn_norm", "input_layernorm"}, {"ffn_norm", "post_attention_layernorm"},
};
constexpr NamePair kLlamaTop[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};

constexpr NamePair kGpt2Layer[] = {
    {"attn_norm", "ln_1"}, {"attn_qkv", "attn.c_attn"}, {"attn_output", "attn.c_proj"},
    {"ffn_norm", "ln_2"},  {"ffn_up", "mlp.c_fc"},      {"ffn_down", "mlp.c_proj"},
};
constexpr NamePair kGpt2Top[] = {{"token_embd", "transformer.wte"},
                                 {"position_embd", "transformer.wpe"},
                                 {"output_norm", "transformer.ln_f"},
                                 {"output", "lm_head"}};

// Qwen3: Llama's names plus the per-head q/k norms.
constexpr NamePair kQwen3Layer[] = {
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
};
// OLMo-2: no input norm; norms after each sublayer; whole-projection q/k norms.
constexpr NamePair kOlmo2Layer[] = {
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};
// Phi-3: fused [q | k | v] and [gate | up].
constexpr NamePair kPhi3Layer[] = {
    {"attn_qkv", "self_attn.qkv_proj"}, {"attn_output", "self_attn.o_proj"}, {"ffn_up", "mlp.gate_up_proj"},
    {"ffn_down", "mlp.down_proj"},      {"attn_norm", "input_layernorm"},    {"ffn_norm", "post_attention_layernorm"},
};
// Gemma 2 and 3: four norms per layer; Gemma 3 adds the per-head q/k norms.
constexpr NamePair kGemma2Layer[] = {
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"attn_norm", "input_layernorm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};
// Mixture of experts: the router and the experts' projections, stacked by
// expert in one [experts, rows, cols] tensor each (hf_expert_from_gguf).
constexpr NamePair kMixtralMoe[] = {{"ffn_gate_inp", "block_sparse_moe.gate"}};
constexpr NamePair kQwen3MoeMoe[] = {{"ffn_gate_inp", "mlp.gate"}};
constexpr NamePair kMixtralExperts[] = {{"ffn_gate_exps", "w1"}, {"ffn_up_exps", "w3"}, {"ffn_down_exps", "w2"}};
constexpr NamePair kQwen3MoeExperts[] = {
    {"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}};
constexpr NamePair kGptNeoxLayer[] = {
    {"attn_norm", "input_layernorm"},   {"attn_qkv", "attention.query_key_value"},
    {"attn_output", "attention.dense"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_up", "mlp.dense_h_to_4h"},    {"ffn_down", "mlp.dense_4h_to_h"},
};
constexpr NamePair kGptNeoxTop[] = {
    {"token_embd", "gpt_neox.embed_in"}, {"output_norm", "gpt_neox.final_layer_norm"}, {"output", "embed_out"}};

}  // namespace

std::optional<std::string> hf_name_from_gguf(const std::string& architecture, const std::string& gguf_name) {
  // GGUF architecture -> (layer table, top table, layer prefix); gemma uses Llama's names.
  const NamePair* layer_table = nullptr;
  size_t layer_n = 0;
  const NamePair* top_table = kLlamaTop;
  size_t top_n = sizeof(kLlamaTop) / sizeof(kLlamaTop[0]);
  std::string prefix = "model.layers.";
  auto use = [&](const auto& table) {
    layer_table = table;
    layer_n = sizeof(table) / sizeof(table[0]);
  };
  // MoE stems first: they exist only in MoE files, so a dense file never matches them.
  const NamePair* moe_table = nullptr;
  if (architecture == "llama") moe_table = kMixtralMoe;
  if (architecture == "qwen3moe") moe_table = kQwen3MoeMoe;
  if (architecture == "llama" || architecture == "qwen2" || architecture == "gemma") {
    use(kLlamaLayer);
  } else if (architecture == "gemma2" || architecture == "gemma3") {
    use(kGemma2Layer);
  } else if (architecture == "qwen3" || architecture == "qwen3moe") {
    use(kQwen3Layer);
  } else if (architecture == "olmo2") {
    use(kOlmo2Layer);
  } else if (architecture == "phi3") {
    use(kPhi3Layer);
  } else if (architecture == "gptneox") {
    use(kGptNeoxLayer);
    top_table = kGptNeoxTop;
    top_n = sizeof(kGptNeoxTop) / sizeof(kGptNeoxTop[0]);
    prefix = "gpt_neox.layers.";
  } else if (architecture == "gpt2") {
    use(kGpt2Layer);
    top_table = kGpt2Top;
    top_n = sizeof(kGpt2Top) / sizeof(kGpt2Top[0]);
    prefix = "transformer.h.";
  } else {
    return std::nullopt;
  }
  auto find = [](const NamePair* table, size_t n, const std::string& stem) -> const char* {
    for (size_t i = 0; i < n; ++i)
      if (stem == table[i].gguf) return table[i].hf;
    return nullptr;
  };

  std::string suffix;
  if (absl::EndsWith(gguf_name, ".weight")) {
    suffix = ".weight";
  } else if (absl::EndsWith(gguf_name, ".bias")) {
    suffix = ".bias";
  } else {
    return std::nullopt;
  }
  std::string base = gguf_name.substr(0, gguf_name.size() - suffix.size());

  if (base.compare(0, 4, "blk.") == 0) {
    size_t dot = base.find('.', 4);
    if (dot == std::string::npos || dot == 4 || dot - 4 > 9) return std::nullopt;
    std::string layer = base.substr(4, dot - 4);
    for (char c : layer) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    if (layer.size() > 1 && layer[0] == '0') return std::nullopt;  // one spelling per layer
    std::string stem = base.substr(dot + 1);
    const char* hf = moe_table ? find(moe_table, 1, stem) : nullptr;
    if (hf == nullptr) hf = find(layer_table, layer_n, stem);
    if (hf == nullptr) return std::nullopt;
    return prefix + layer + "." + hf + suffix;
  }
  const char* hf = find(top_table, top_n, base);
  if (hf == nullptr) return std::nullopt;
  return std::string(hf) + suffix;
}

std::optional<GgufExpertName> hf_expert_from_gguf(const std::string& architecture, const std::string& gguf_name) {
  const NamePair* table = architecture == "llama"      ? kMixtralExperts
                          : architecture == "qwen3moe" ? kQwen3MoeExperts
                                                       : nullptr;
  if (table == nullptr || !absl::EndsWith(gguf_name, ".weight") || gguf_name.compare(0, 4, "blk.") != 0)
    return std::nullopt;
  const std::string base = gguf_name.substr(0, gguf_name.size() - 7);
  const size_t dot = base.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 9) return std::nullopt;
  const std::string layer = base.substr(4, dot - 4);
  for (char c : layer)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  if (layer.size() > 1 && layer[0] == '0') return std::nullopt;
  const std::string stem = base.substr(dot + 1);
  for (size_t i = 0; i < 3; ++i) {
    if (stem != table[i].gguf) continue;
    const std::string block = architecture == "llama" ? ".block_sparse_moe.experts." : ".mlp.experts.";
    return GgufExpertName{"model.layers." + layer + block, std::string(".") + table[i].hf + ".weight"};
  }
  return std::nullopt;
}

}  // namespace nnsight
