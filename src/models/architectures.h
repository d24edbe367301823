// The rotary decoder architectures built on models/decoder.h, one file each,
// selected by ModelConfig::architecture (create_causal_lm).
#pragma once

#include <memory>

#include "models/causal_lm.h"

namespace nnsight {

// Qwen3 and Qwen3-MoE (qwen3.cpp): Llama with per-head q/k RMSNorm.
std::shared_ptr<CausalLM> make_qwen3(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts);
// Gemma, Gemma 2, Gemma 3 text (gemma.cpp).
std::shared_ptr<CausalLM> make_gemma(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts);
// GPT-NeoX / Pythia (gpt_neox.cpp).
std::shared_ptr<CausalLM> make_gpt_neox(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                        const at::TensorOptions& opts);
// OLMo-2 (olmo2.cpp).
std::shared_ptr<CausalLM> make_olmo2(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts);
// Phi-3 (phi3.cpp).
std::shared_ptr<CausalLM> make_phi3(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                    const at::TensorOptions& opts);
// Mixtral (mixtral.cpp).
std::shared_ptr<CausalLM> make_mixtral(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                       const at::TensorOptions& opts);

}  // namespace nnsight
