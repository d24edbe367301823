#include "core/gguf/gguf_tensor_names.h"

#include <cctype>
#include <cstring>

namespace nnsight {
namespace {

struct NamePair {
  const char* gguf;
  const char* hf;
};

// Per-layer stems ("blk.N.<stem>.weight").
constexpr NamePair kLlamaLayer[] = {
    {"attn_q", "self_attn.q_proj"},        {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},        {"attn_output", "self_attn.o_proj"},
    {"ffn_gate", "mlp.gate_proj"},         {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},         {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
};
constexpr NamePair kLlamaTop[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};

constexpr NamePair kGpt2Layer[] = {
    {"attn_norm", "ln_1"},          {"attn_qkv", "attn.c_attn"}, {"attn_output", "attn.c_proj"},
    {"ffn_norm", "ln_2"},           {"ffn_up", "mlp.c_fc"},      {"ffn_down", "mlp.c_proj"},
};
constexpr NamePair kGpt2Top[] = {{"token_embd", "transformer.wte"},
                                 {"position_embd", "transformer.wpe"},
                                 {"output_norm", "transformer.ln_f"},
                                 {"output", "lm_head"}};

template <size_t N>
const char* lookup(const NamePair (&table)[N], const std::string& stem) {
  for (const NamePair& p : table) {
    if (stem == p.gguf) return p.hf;
  }
  return nullptr;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

std::optional<std::string> hf_name_from_gguf(const std::string& architecture,
                                             const std::string& gguf_name) {
  bool llama = architecture == "llama";
  bool gpt2 = architecture == "gpt2";
  if (!llama && !gpt2) return std::nullopt;

  std::string suffix;
  if (ends_with(gguf_name, ".weight")) {
    suffix = ".weight";
  } else if (ends_with(gguf_name, ".bias")) {
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
    const char* hf = llama ? lookup(kLlamaLayer, stem) : lookup(kGpt2Layer, stem);
    if (hf == nullptr) return std::nullopt;
    return std::string(llama ? "model.layers." : "transformer.h.") + layer + "." + hf + suffix;
  }
  const char* hf = llama ? lookup(kLlamaTop, base) : lookup(kGpt2Top, base);
  if (hf == nullptr) return std::nullopt;
  return std::string(hf) + suffix;
}

}  // namespace nnsight
