#include "models/causal_lm.h"

#include <nnsight/error.hpp>

#include "models/architectures.h"
#include "models/gpt2.h"
#include "models/llama.h"

namespace nnsight {

CausalLM::CausalLM(std::string type_name, ModelConfig config, tp::ParallelContext ctx, at::TensorOptions options)
    : Module(std::move(type_name)), config_(std::move(config)), ctx_(std::move(ctx)), options_(options) {
  config_.validate();
}

void CausalLM::load(const WeightSource& source) { load_all_weights(source); }

void check_tensor_parallel(const ModelConfig& config, int world_size) {
  if (world_size <= 1) return;
  // In the order the constructors meet them: attention, (KV heads), MLP, vocabulary.
  tp::ShardLayout::even(config.num_heads, world_size, "number of attention heads");
  if (config.architecture != "gpt2") llama_kv_head_layout(config, world_size);
  tp::ShardLayout::even(config.intermediate_size, world_size, "intermediate (MLP) size");
  if (config.moe_intermediate_size > 0)
    tp::ShardLayout::even(config.moe_intermediate_size, world_size, "expert intermediate (MLP) size");
  tp::ShardLayout::even(config.vocab_size, world_size, "vocabulary size");
}

std::shared_ptr<CausalLM> create_causal_lm(const ModelConfig& config, const tp::ParallelContext& ctx,
                                           const at::TensorOptions& options) {
  if (config.architecture == "llama") return std::make_shared<LlamaForCausalLM>(config, ctx, options);
  if (config.architecture == "gpt2") return std::make_shared<GPT2LMHeadModel>(config, ctx, options);
  if (config.architecture == "qwen3" || config.architecture == "qwen3_moe") return make_qwen3(config, ctx, options);
  if (config.architecture == "gemma" || config.architecture == "gemma2" || config.architecture == "gemma3_text")
    return make_gemma(config, ctx, options);
  if (config.architecture == "gpt_neox") return make_gpt_neox(config, ctx, options);
  if (config.architecture == "olmo2") return make_olmo2(config, ctx, options);
  if (config.architecture == "phi3") return make_phi3(config, ctx, options);
  if (config.architecture == "mixtral") return make_mixtral(config, ctx, options);
  std::string list;
  for (const auto& a : supported_architectures()) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError("model architecture '" + config.architecture + "' is not supported (" + list + ")");
}

std::shared_ptr<CausalLM> load_causal_lm(const WeightSource& source, const tp::ParallelContext& ctx,
                                         const at::TensorOptions& options) {
  auto model = create_causal_lm(source.config(), ctx, options);
  model->load(source);
  return model;
}

}  // namespace nnsight
