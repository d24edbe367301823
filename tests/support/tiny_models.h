// Tiny random models built in-process, and a dense per-sequence reference
// forward written independently of the library's model code (plain ATen
// math, no paging, no fused kernels) to check the models against.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model_config.h"
#include "models/causal_lm.h"

namespace nnsight::testing {

ModelConfig tiny_llama_config(bool tied = false);
ModelConfig tiny_gpt2_config();
// Variants whose heads, MLP columns and vocabulary divide by 2 and 4 (for
// tensor parallelism): Llama with 4 heads and 2 KV heads (at 4 ranks, fewer
// KV heads than ranks), vocabulary 96; GPT-2 with vocabulary 88.
ModelConfig tiny_tp_llama_config();
ModelConfig tiny_tp_gpt2_config();
// A model of `config` with seeded random weights (randomize), world size 1.
std::shared_ptr<CausalLM> tiny_random_model(const ModelConfig& config, uint64_t seed);

// Every parameter (by Hugging Face name) filled from a seeded normal
// distribution; norms near 1 so activations stay well scaled.
void randomize(CausalLM& model, uint64_t seed);

// Parameters by Hugging Face name (float32 copies) -- what the reference uses.
std::map<std::string, at::Tensor> parameters_of(CausalLM& model);

// Dense causal forward of one whole sequence: returns the final hidden
// states [len, hidden] (after the final norm) and the logits [len, vocab].
struct DenseOutput {
  at::Tensor hidden;
  at::Tensor logits;
};
// `tap` (Llama only), when given, sees each module output the reference
// computes -- "model.layers.L.self_attn", "model.layers.L.mlp",
// "model.layers.L" and "model.norm" -- and returns the value the forward goes
// on with (add a zero tensor that requires grad to take gradients there).
using DenseTap = std::function<at::Tensor(const std::string& module, const at::Tensor& output)>;
DenseOutput dense_reference(const ModelConfig& cfg, const std::map<std::string, at::Tensor>& params,
                            const std::vector<int64_t>& tokens, const DenseTap& tap = nullptr);

}  // namespace nnsight::testing
