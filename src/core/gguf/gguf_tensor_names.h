// Mapping from llama.cpp's GGUF tensor names to Hugging Face parameter names
// for the architectures the GGUF loader supports (llama.cpp spellings: "llama",
// "gpt2", "qwen3", "olmo2", "phi3", "gptneox", "gemma").
#pragma once

#include <optional>
#include <string>

namespace nnsight {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" (llama),
// "blk.3.attn_qkv.bias" -> "transformer.h.3.attn.c_attn.bias" (gpt2), ...
// nullopt when the name has no Hugging Face counterpart in that architecture.
std::optional<std::string> hf_name_from_gguf(const std::string& architecture, const std::string& gguf_name);

}  // namespace nnsight
