// Loading an attached module from its file (docs/attached-modules.md):
//   - an SAE or transcoder in SAELens's layout: a directory holding
//     sae_weights.safetensors (W_enc [d_in, d_sae], b_enc [d_sae],
//     W_dec [d_sae, d_out], b_dec [d_out], threshold [d_sae] for JumpReLU)
//     and cfg.json (architecture "standard" | "jumprelu" | "topk" with k, or
//     the older activation_fn_str "relu" | "topk" with activation_fn_kwargs.k;
//     apply_b_dec_to_input; normalize_activations must be none), or the
//     .safetensors file itself with cfg.json beside it;
//   - a linear probe: a .safetensors file with weight [n_out, d_in] and an
//     optional bias [n_out];
//   - a steering vector: a .safetensors file with vector [d_in].
// Every error is a LoadError naming the file and the tensor or field.
#pragma once

#include <memory>
#include <string>

#include "models/attached/attached_module.h"

namespace nnsight {

std::shared_ptr<AttachedModule> load_attached_module(const std::string& file);

}  // namespace nnsight
