#include "core/model_config.h"

#include <nnsight/error.hpp>

namespace nnsight {

namespace {
void require(bool ok, const std::string& field, const std::string& why) {
  if (!ok) throw ConfigError("model config: " + field + " " + why);
}
}  // namespace

void ModelConfig::validate() const {
  require(architecture == "llama" || architecture == "gpt2", "architecture",
          "'" + architecture + "' is not supported (llama, gpt2)");
  require(vocab_size > 0, "vocab_size", "must be positive, got " + std::to_string(vocab_size));
  require(hidden_size > 0, "hidden_size", "must be positive, got " + std::to_string(hidden_size));
  require(intermediate_size > 0, "intermediate_size", "must be positive, got " + std::to_string(intermediate_size));
  require(num_layers > 0, "num_layers", "must be positive, got " + std::to_string(num_layers));
  require(num_heads > 0, "num_heads", "must be positive, got " + std::to_string(num_heads));
  require(num_kv_heads > 0, "num_kv_heads", "must be positive, got " + std::to_string(num_kv_heads));
  require(num_heads % num_kv_heads == 0, "num_heads",
          "(" + std::to_string(num_heads) + ") must be a multiple of num_kv_heads (" + std::to_string(num_kv_heads) + ")");
  require(head_dim > 0, "head_dim", "must be positive, got " + std::to_string(head_dim));
  require(architecture != "llama" || head_dim % 2 == 0, "head_dim", "must be even for rotary embeddings");
  require(architecture != "gpt2" || num_heads * head_dim == hidden_size, "head_dim",
          "times num_heads must equal hidden_size for gpt2");
  require(max_position > 0, "max_position", "must be positive, got " + std::to_string(max_position));
  require(norm_eps > 0, "norm_eps", "must be positive");
  require(architecture != "llama" || rope_theta > 0, "rope_theta", "must be positive");
}

}  // namespace nnsight
