// Attached modules (docs/attached-modules.md): sparse autoencoders,
// transcoders, linear probes and steering vectors loaded from files and
// attached to the served model with EngineArgs::attach / --attach. Traces use
// them through envoys like any module (`lm.envoy("sae_l3.hook_sae_acts_post")`).
//
// save_sae writes an SAE a program trained itself in SAELens's layout, so that
// it can be attached (and read by SAELens).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace nnsight {

struct SaeFiles {
  at::Tensor W_enc;                       // [d_in, d_sae]
  at::Tensor b_enc;                       // [d_sae]
  at::Tensor W_dec;                       // [d_sae, d_in]
  at::Tensor b_dec;                       // [d_in]
  at::Tensor threshold;                   // [d_sae], for "jumprelu"
  std::string architecture = "standard";  // "standard" (ReLU), "jumprelu", "topk"
  int64_t k = 0;                          // for "topk"
  bool apply_b_dec_to_input = true;       // subtract b_dec before encoding
  std::string hook_name;                  // recorded in cfg.json (the hook point); optional
};

// Writes `directory`/sae_weights.safetensors (float32) and cfg.json, creating
// the directory. Throws nnsight::Error naming the tensor for a wrong shape.
void save_sae(const std::string& directory, const SaeFiles& sae);

}  // namespace nnsight
