// The rotary embedding settings of a Hugging Face config.json, in either
// spelling: transformers 4.x (rope_theta, rope_scaling and
// partial_rotary_factor at the top level) or 5.x (rope_parameters: one dict,
// or one per layer type as Gemma 3 has it). A file may carry both; then they
// must agree, or the error names both fields.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/hf/hf_config_fields.h"
#include "core/model_config.h"

namespace nnsight {

// What one model_type implements, and where its config spells the settings.
struct HfRopeRules {
  // Rope types besides "default" (from: linear, llama3, longrope, yarn).
  std::set<std::string> scaling_types;
  double default_theta = 10000.0;
  // Whether a partial_rotary_factor below 1 is implemented (GPT-NeoX, Phi-3).
  bool partial_rotary = false;
  double default_partial = 1.0;
  // "" when rope_parameters is one dict for every layer; else the layer type
  // whose dict this reads ("full_attention", "sliding_attention"), and then
  // rope_parameters must hold only per-layer-type dicts.
  std::string layer_type;
  // Top-level 4.x spellings of the base and the rotary fraction.
  std::vector<std::string> theta_keys = {"rope_theta"};
  std::vector<std::string> partial_keys = {"partial_rotary_factor"};
  // Whether the top-level rope_scaling describes these layers.
  bool v4_scaling = true;
};

struct HfRope {
  double theta = 10000.0;
  RopeScaling scaling;  // type "" when "default"
  // The dict that gave `scaling` and `original_max_position`, for messages:
  // "rope_parameters", "rope_parameters.full_attention" or "rope_scaling".
  std::string scaling_path = "rope_parameters";
  double partial_rotary_factor = 1.0;
  // llama3 / longrope: original_max_position_embeddings where the rope dict
  // gives it (the caller supplies the fallback and checks the top level).
  std::optional<int64_t> original_max_position;
  // yarn: what derives the attention factor when the dict gives none.
  std::optional<double> mscale, mscale_all_dim;
};

// Marks every field it reads in `f`. `owner` names the model type in
// messages ("model_type 'llama'"). Throws LoadError for a rope type or a rope
// field the engine does not implement, naming the field, and for spellings
// that disagree.
HfRope read_hf_rope(TrackedHfConfigFields& f, const std::string& owner, const HfRopeRules& rules);

// YaRN's settings the dict may leave out, as transformers 5.x derives them:
// original_max_position_embeddings defaults to max_position; a missing factor
// is max_position / original; a missing attention factor is
// 0.1 ln(factor) + 1 (with mscale and mscale_all_dim, the ratio of that
// formula scaled by each). No-op for other rope types.
void finish_yarn(RopeScaling& s, const HfRope& rope, int64_t max_position);

}  // namespace nnsight
