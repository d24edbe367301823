#include "core/model_config.h"

#include <cmath>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

[[noreturn]] void bad(const ModelConfig& c, const std::string& field, const std::string& problem) {
  std::string who = c.name.empty() ? c.architecture : c.name;
  throw ConfigError("invalid model config" + (who.empty() ? std::string() : " (" + who + ")") +
                    ": " + field + " " + problem);
}

void positive(const ModelConfig& c, const char* field, int64_t v) {
  if (v <= 0) bad(c, field, "= " + std::to_string(v) + ", must be positive");
}

}  // namespace

void ModelConfig::validate() const {
  if (architecture != "llama" && architecture != "gpt2") {
    bad(*this, "architecture", "= '" + architecture + "', expected 'llama' or 'gpt2'");
  }
  positive(*this, "vocab_size", vocab_size);
  positive(*this, "hidden_size", hidden_size);
  positive(*this, "intermediate_size", intermediate_size);
  positive(*this, "num_layers", num_layers);
  positive(*this, "num_heads", num_heads);
  positive(*this, "num_kv_heads", num_kv_heads);
  positive(*this, "head_dim", head_dim);
  positive(*this, "max_position", max_position);
  if (hidden_size % num_heads != 0) {
    bad(*this, "num_heads", "= " + std::to_string(num_heads) + " does not divide hidden_size = " +
                                std::to_string(hidden_size));
  }
  if (num_heads % num_kv_heads != 0) {
    bad(*this, "num_kv_heads", "= " + std::to_string(num_kv_heads) +
                                   " does not divide num_heads = " + std::to_string(num_heads));
  }
  if (architecture == "gpt2" && head_dim * num_heads != hidden_size) {
    bad(*this, "head_dim", "= " + std::to_string(head_dim) + ", but gpt2 needs hidden_size / " +
                               "num_heads = " + std::to_string(hidden_size / num_heads));
  }
  if (architecture == "llama" && head_dim % 2 != 0) {
    bad(*this, "head_dim", "= " + std::to_string(head_dim) + " is odd; rotary embeddings need pairs");
  }
  if (!(norm_eps > 0.0) || !std::isfinite(norm_eps)) {
    bad(*this, "norm_eps", "= " + std::to_string(norm_eps) + ", must be positive and finite");
  }
  if (architecture == "llama" && (!(rope_theta > 0.0) || !std::isfinite(rope_theta))) {
    bad(*this, "rope_theta", "= " + std::to_string(rope_theta) + ", must be positive and finite");
  }
  if (rope_scaling.factor != 0.0) {
    const RopeScaling& r = rope_scaling;
    if (!(r.factor > 0.0) || !std::isfinite(r.factor)) {
      bad(*this, "rope_scaling.factor", "= " + std::to_string(r.factor) + ", must be positive");
    }
    if (!(r.low_freq_factor > 0.0) || !(r.high_freq_factor > r.low_freq_factor)) {
      bad(*this, "rope_scaling.high_freq_factor",
          "= " + std::to_string(r.high_freq_factor) + " must exceed low_freq_factor = " +
              std::to_string(r.low_freq_factor) + " > 0");
    }
    positive(*this, "rope_scaling.original_max_position", r.original_max_position);
  }
  if (hidden_act.empty()) bad(*this, "hidden_act", "is empty");
  if (bos_token_id < -1 || bos_token_id >= vocab_size) {
    bad(*this, "bos_token_id", "= " + std::to_string(bos_token_id) + " is outside the vocabulary (" +
                                   std::to_string(vocab_size) + " tokens; -1 for none)");
  }
  if (eos_token_id < -1 || eos_token_id >= vocab_size) {
    bad(*this, "eos_token_id", "= " + std::to_string(eos_token_id) + " is outside the vocabulary (" +
                                   std::to_string(vocab_size) + " tokens; -1 for none)");
  }
}

}  // namespace nnsight
