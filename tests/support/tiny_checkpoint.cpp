#include "support/tiny_checkpoint.h"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/safetensors/safetensors_writer.h"

namespace nnsight::testing {

std::string write_hf_checkpoint(const std::string& dir, CausalLM& model) {
  const ModelConfig& c = model.config();
  nlohmann::json cfg;
  if (c.architecture == "llama") {
    cfg = {{"model_type", "llama"},
           {"vocab_size", c.vocab_size},
           {"hidden_size", c.hidden_size},
           {"intermediate_size", c.intermediate_size},
           {"num_hidden_layers", c.num_layers},
           {"num_attention_heads", c.num_heads},
           {"num_key_value_heads", c.num_kv_heads},
           {"head_dim", c.head_dim},
           {"max_position_embeddings", c.max_position},
           {"rms_norm_eps", c.norm_eps},
           {"rope_theta", c.rope_theta},
           {"tie_word_embeddings", c.tie_word_embeddings},
           {"hidden_act", c.hidden_act},
           {"bos_token_id", c.bos_token_id},
           {"eos_token_id", c.eos_token_id}};
  } else if (c.architecture == "gpt2") {
    cfg = {{"model_type", "gpt2"},
           {"vocab_size", c.vocab_size},
           {"n_embd", c.hidden_size},
           {"n_layer", c.num_layers},
           {"n_head", c.num_heads},
           {"n_inner", c.intermediate_size},
           {"n_positions", c.max_position},
           {"layer_norm_epsilon", c.norm_eps},
           {"activation_function", c.hidden_act},
           {"bos_token_id", c.bos_token_id},
           {"eos_token_id", c.eos_token_id}};
  } else {
    throw std::runtime_error("write_hf_checkpoint: unknown architecture " + c.architecture);
  }
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto& p : model.named_parameters(true)) {
    const std::string& name = p.key();
    if (c.tie_word_embeddings && name == "lm_head.weight") continue;
    at::Tensor t = p.value().detach().to(at::kFloat).contiguous();
    // GPT-2 stores its Conv1D weights as [in, out].
    const bool conv1d = c.architecture == "gpt2" && t.dim() == 2 &&
                        (name.find(".c_attn.") != std::string::npos || name.find(".c_proj.") != std::string::npos ||
                         name.find(".c_fc.") != std::string::npos);
    tensors.emplace_back(name, conv1d ? t.t().contiguous() : t);
  }
  write_safetensors(dir + "/model.safetensors", tensors);
  return dir;
}

}  // namespace nnsight::testing
