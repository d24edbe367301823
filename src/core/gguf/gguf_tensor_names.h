// Mapping from llama.cpp's GGUF tensor names to Hugging Face parameter names
// for the architectures the GGUF loader supports (llama.cpp spellings: "llama"
// (Mixtral too), "gpt2", "qwen3", "qwen3moe", "olmo2", "phi3", "gptneox", "gemma",
// "gemma2", "gemma3").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace nnsight {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" (llama),
// "blk.3.attn_qkv.bias" -> "transformer.h.3.attn.c_attn.bias" (gpt2), ...
// nullopt when the name has no Hugging Face counterpart in that architecture.
std::optional<std::string> hf_name_from_gguf(const std::string& architecture, const std::string& gguf_name);

// llama.cpp stacks a layer's experts into one tensor [experts, rows, cols]:
// "blk.1.ffn_gate_exps.weight" -> expert i is prefix + i + suffix,
// "model.layers.1.block_sparse_moe.experts." i ".w1.weight" (llama = Mixtral).
struct GgufExpertName {
  std::string prefix, suffix;
  std::string of(int64_t expert) const { return prefix + std::to_string(expert) + suffix; }
};
std::optional<GgufExpertName> hf_expert_from_gguf(const std::string& architecture, const std::string& gguf_name);

}  // namespace nnsight
