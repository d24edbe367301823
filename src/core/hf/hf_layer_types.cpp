#include "core/hf/hf_layer_types.h"

#include <nnsight/error.hpp>

namespace nnsight {

std::optional<std::vector<bool>> read_hf_layer_types(TrackedHfConfigFields& f, int64_t num_layers,
                                                     const std::string& owner) {
  f.mark("layer_types");
  const nlohmann::json* v = f.get("layer_types");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) throw f.type_error("layer_types", *v, "a list of strings");
  if (static_cast<int64_t>(v->size()) != num_layers) {
    throw LoadError(f.what() + ": field 'layer_types' has " + std::to_string(v->size()) + " entries for " +
                    std::to_string(num_layers) + " layers (num_hidden_layers)");
  }
  std::vector<bool> sliding;
  for (size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& t = (*v)[i];
    const std::string name = "layer_types[" + std::to_string(i) + "]";
    if (!t.is_string()) throw f.type_error(name, t, "a string");
    const std::string s = t.get<std::string>();
    if (s != "full_attention" && s != "sliding_attention") {
      throw LoadError(f.what() + ": field '" + name + "' = \"" + s + "\" is not implemented for " + owner +
                      " (only full_attention and sliding_attention)");
    }
    sliding.push_back(s == "sliding_attention");
  }
  return sliding;
}

std::string describe_layer_types(const std::vector<bool>& sliding) {
  std::string out = "[";
  for (size_t i = 0; i < sliding.size() && i < 8; ++i) {
    out += (i ? ", " : "") + std::string(sliding[i] ? "sliding_attention" : "full_attention");
  }
  return out + (sliding.size() > 8 ? ", ...]" : "]");
}

}  // namespace nnsight
