// `layer_types`: transformers 5.x spells each decoder layer's attention in a
// list, one entry per layer ("full_attention" or "sliding_attention"),
// where 4.x configs derived it from other fields (Gemma 3's
// sliding_window_pattern, Qwen's use_sliding_window and max_window_layers).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/hf/hf_config_fields.h"

namespace nnsight {

// Whether each layer slides, or std::nullopt when the field is absent or
// null; marks it read. Throws LoadError naming the field for a list whose
// length is not num_layers, and naming the entry ("layer_types[3]") for an
// attention type the engine does not implement (chunked, linear, ...).
std::optional<std::vector<bool>> read_hf_layer_types(TrackedHfConfigFields& f, int64_t num_layers,
                                                     const std::string& owner);

// "[sliding_attention, full_attention, ...]" for messages (cut after 8 entries).
std::string describe_layer_types(const std::vector<bool>& sliding);

}  // namespace nnsight
