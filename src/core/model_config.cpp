#include "core/model_config.h"

#include <algorithm>
#include <cmath>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

[[noreturn]] void bad(const ModelConfig& c, const std::string& field, const std::string& problem) {
  std::string who = c.name.empty() ? c.architecture : c.name;
  throw ConfigError("invalid model config" + (who.empty() ? std::string() : " (" + who + ")") + ": " + field + " " +
                    problem);
}

void positive(const ModelConfig& c, const char* field, int64_t v) {
  if (v <= 0) bad(c, field, "= " + std::to_string(v) + ", must be positive");
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> k = {"llama",    "gpt2",  "qwen3", "gemma",   "gemma2",   "gemma3_text",
                                             "gpt_neox", "olmo2", "phi3",  "mixtral", "qwen3_moe"};
  return k;
}

void ModelConfig::validate() const {
  const auto& archs = supported_architectures();
  if (std::find(archs.begin(), archs.end(), architecture) == archs.end()) {
    std::string list;
    for (const auto& a : archs) list += (list.empty() ? "" : ", ") + a;
    bad(*this, "architecture", "= '" + architecture + "' is not supported (" + list + ")");
  }
  if (!multimodal.empty() && !(multimodal == "gemma3" && architecture == "gemma3_text"))
    bad(*this, "multimodal", "= '" + multimodal + "' is not supported (only 'gemma3' around gemma3_text)");
  positive(*this, "vocab_size", vocab_size);
  positive(*this, "hidden_size", hidden_size);
  positive(*this, "intermediate_size", intermediate_size);
  positive(*this, "num_layers", num_layers);
  positive(*this, "num_heads", num_heads);
  positive(*this, "num_kv_heads", num_kv_heads);
  positive(*this, "head_dim", head_dim);
  positive(*this, "max_position", max_position);
  if (hidden_size % num_heads != 0) {
    bad(*this, "num_heads",
        "= " + std::to_string(num_heads) + " does not divide hidden_size = " + std::to_string(hidden_size));
  }
  if (num_heads % num_kv_heads != 0) {
    bad(*this, "num_kv_heads",
        "= " + std::to_string(num_kv_heads) + " does not divide num_heads = " + std::to_string(num_heads));
  }
  if (architecture == "gpt2" && head_dim * num_heads != hidden_size) {
    bad(*this, "head_dim",
        "= " + std::to_string(head_dim) + ", but gpt2 needs hidden_size / " +
            "num_heads = " + std::to_string(hidden_size / num_heads));
  }
  const bool rotary = architecture != "gpt2";
  if (rotary && head_dim % 2 != 0) {
    bad(*this, "head_dim", "= " + std::to_string(head_dim) + " is odd; rotary embeddings need pairs");
  }
  if (!(norm_eps > 0.0) || !std::isfinite(norm_eps)) {
    bad(*this, "norm_eps", "= " + std::to_string(norm_eps) + ", must be positive and finite");
  }
  if (rotary && (!(rope_theta > 0.0) || !std::isfinite(rope_theta))) {
    bad(*this, "rope_theta", "= " + std::to_string(rope_theta) + ", must be positive and finite");
  }
  if (rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
    bad(*this, "rotary_dim",
        "= " + std::to_string(rotary_dim) + ", must be even and within head_dim = " + std::to_string(head_dim));
  }
  if (sliding_window < 0) bad(*this, "sliding_window", "= " + std::to_string(sliding_window) + " is negative");
  if (!sliding_layers.empty() && static_cast<int64_t>(sliding_layers.size()) != num_layers) {
    bad(*this, "sliding_layers",
        "has " + std::to_string(sliding_layers.size()) + " entries for " + std::to_string(num_layers) + " layers");
  }
  if (!nope_layers.empty() && static_cast<int64_t>(nope_layers.size()) != num_layers) {
    bad(*this, "nope_layers",
        "has " + std::to_string(nope_layers.size()) + " entries for " + std::to_string(num_layers) + " layers");
  }
  if (attn_logit_softcap < 0 || final_logit_softcap < 0 || query_pre_attn_scalar < 0 || rope_local_theta < 0) {
    bad(*this, "softcap / query_pre_attn_scalar / rope_local_theta", "must not be negative");
  }
  if (num_experts < 0 || num_experts_per_token < 0 || num_experts_per_token > num_experts ||
      (num_experts > 0 && num_experts_per_token == 0)) {
    bad(*this, "num_experts_per_tok",
        "= " + std::to_string(num_experts_per_token) + " must be in [1, " + std::to_string(num_experts) + "]");
  }
  if (moe_intermediate_size < 0) bad(*this, "moe_intermediate_size", "is negative");
  if (!moe_layers.empty() && static_cast<int64_t>(moe_layers.size()) != num_layers) {
    bad(*this, "moe_layers",
        "has " + std::to_string(moe_layers.size()) + " entries for " + std::to_string(num_layers) + " layers");
  }
  if (rope_scaling.is_llama3()) {
    const RopeScaling& r = rope_scaling;
    if (!(r.factor > 0.0) || !std::isfinite(r.factor)) {
      bad(*this, "rope_scaling.factor", "= " + std::to_string(r.factor) + ", must be positive");
    }
    if (!(r.low_freq_factor > 0.0) || !(r.high_freq_factor > r.low_freq_factor)) {
      bad(*this, "rope_scaling.high_freq_factor",
          "= " + std::to_string(r.high_freq_factor) +
              " must exceed low_freq_factor = " + std::to_string(r.low_freq_factor) + " > 0");
    }
    positive(*this, "rope_scaling.original_max_position", r.original_max_position);
  }
  if (rope_scaling.type == "yarn") {
    const RopeScaling& r = rope_scaling;
    if (!(r.factor > 0.0) || !std::isfinite(r.factor)) {
      bad(*this, "rope_scaling.factor", "= " + std::to_string(r.factor) + ", must be positive");
    }
    if (!(r.attention_factor > 0.0) || !std::isfinite(r.attention_factor)) {
      bad(*this, "rope_scaling.attention_factor", "= " + std::to_string(r.attention_factor) + ", must be positive");
    }
    if (!(r.beta_fast > 0.0) || !(r.beta_slow > 0.0)) {
      bad(*this, "rope_scaling.beta_fast", "and beta_slow must be positive");
    }
    positive(*this, "rope_scaling.original_max_position", r.original_max_position);
  }
  if (hidden_act.empty()) bad(*this, "hidden_act", "is empty");
  if (bos_token_id < -1 || bos_token_id >= vocab_size) {
    bad(*this, "bos_token_id",
        "= " + std::to_string(bos_token_id) + " is outside the vocabulary (" + std::to_string(vocab_size) +
            " tokens; -1 for none)");
  }
  if (eos_token_id < -1 || eos_token_id >= vocab_size) {
    bad(*this, "eos_token_id",
        "= " + std::to_string(eos_token_id) + " is outside the vocabulary (" + std::to_string(vocab_size) +
            " tokens; -1 for none)");
  }
  for (int64_t id : more_eos_token_ids) {
    if (id < 0 || id >= vocab_size)
      bad(*this, "more_eos_token_ids",
          "holds " + std::to_string(id) + ", outside the vocabulary (" + std::to_string(vocab_size) + " tokens)");
  }
}

}  // namespace nnsight
