#include "front/remote/model_config_json.h"

namespace nnsight::remote {

ModelConfigInfo config_info(const ModelConfig& c) {
  ModelConfigInfo i;
  i.architecture = c.architecture;
  i.vocab_size = c.vocab_size;
  i.hidden_size = c.hidden_size;
  i.intermediate_size = c.intermediate_size;
  i.num_layers = c.num_layers;
  i.num_heads = c.num_heads;
  i.num_kv_heads = c.num_kv_heads;
  i.head_dim = c.head_dim;
  i.max_position = c.max_position;
  i.norm_eps = c.norm_eps;
  i.rope_theta = c.rope_theta;
  i.num_experts = c.num_experts;
  i.num_experts_per_token = c.num_experts_per_token;
  i.sliding_window = c.sliding_window;
  i.final_logit_softcap = c.final_logit_softcap;
  i.tie_word_embeddings = c.tie_word_embeddings;
  return i;
}

nlohmann::json config_info_to_json(const ModelConfigInfo& i) {
  return {{"architecture", i.architecture},
          {"vocab_size", i.vocab_size},
          {"hidden_size", i.hidden_size},
          {"intermediate_size", i.intermediate_size},
          {"num_layers", i.num_layers},
          {"num_heads", i.num_heads},
          {"num_kv_heads", i.num_kv_heads},
          {"head_dim", i.head_dim},
          {"max_position", i.max_position},
          {"norm_eps", i.norm_eps},
          {"rope_theta", i.rope_theta},
          {"num_experts", i.num_experts},
          {"num_experts_per_token", i.num_experts_per_token},
          {"sliding_window", i.sliding_window},
          {"final_logit_softcap", i.final_logit_softcap},
          {"tie_word_embeddings", i.tie_word_embeddings}};
}

ModelConfigInfo config_info_from_json(const nlohmann::json& j) {
  ModelConfigInfo i;
  i.architecture = j.value("architecture", i.architecture);
  i.vocab_size = j.value("vocab_size", i.vocab_size);
  i.hidden_size = j.value("hidden_size", i.hidden_size);
  i.intermediate_size = j.value("intermediate_size", i.intermediate_size);
  i.num_layers = j.value("num_layers", i.num_layers);
  i.num_heads = j.value("num_heads", i.num_heads);
  i.num_kv_heads = j.value("num_kv_heads", i.num_kv_heads);
  i.head_dim = j.value("head_dim", i.head_dim);
  i.max_position = j.value("max_position", i.max_position);
  i.norm_eps = j.value("norm_eps", i.norm_eps);
  i.rope_theta = j.value("rope_theta", i.rope_theta);
  i.num_experts = j.value("num_experts", i.num_experts);
  i.num_experts_per_token = j.value("num_experts_per_token", i.num_experts_per_token);
  i.sliding_window = j.value("sliding_window", i.sliding_window);
  i.final_logit_softcap = j.value("final_logit_softcap", i.final_logit_softcap);
  i.tie_word_embeddings = j.value("tie_word_embeddings", i.tie_word_embeddings);
  return i;
}

}  // namespace nnsight::remote
