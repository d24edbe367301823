#include "models/llama.h"

#include <ATen/ATen.h>

#include <cmath>

#include <nnsight/error.hpp>

#include "core/kernels/add.h"
#include "core/kernels/paged_attention.h"
#include "core/kernels/undispatched.h"
#include "tp/sharding.h"

namespace nnsight {
namespace {

// The class names transformers gives the checkpoint's modules: Llama's,
// Mistral's, Qwen2's or SmolLM3's (the same computation).
std::string type_prefix(const ModelConfig& cfg) {
  if (cfg.model_type == "mistral") return "Mistral";
  if (cfg.model_type == "qwen2") return "Qwen2";
  if (cfg.model_type == "smollm3") return "SmolLM3";
  return "Llama";
}

}  // namespace

// Every rank's KV heads: an even split when there are at least as many KV
// heads as ranks, else one replicated head shared by world/kv_heads ranks
// (rank r's query heads then all map to KV head r / (world / kv_heads)).
tp::ShardLayout llama_kv_head_layout(const ModelConfig& cfg, int world) {
  const int64_t kvh = cfg.num_kv_heads;
  if (kvh >= world) return tp::ShardLayout::even(kvh, world, "number of key/value heads");
  if (world % kvh != 0) {
    throw ConfigError("tensor-parallel size (" + std::to_string(world) +
                      ") is not a multiple of the number of "
                      "key/value heads (" +
                      std::to_string(kvh) + ")");
  }
  return tp::ShardLayout::from(kvh, world, [&](int r) {
    return std::vector<tp::RowRange>{tp::RowRange{r / (world / kvh), 1}};
  });
}

LlamaAttention::LlamaAttention(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                               std::shared_ptr<const kernels::RotaryEmbedding> rotary)
    : Module(type_prefix(cfg) + "Attention"), head_dim_(cfg.head_dim), rotary_(std::move(rotary)) {
  set_output_tuple_size(2);
  const int64_t d = cfg.head_dim, hidden = cfg.hidden_size;
  const tp::ShardLayout heads = tp::ShardLayout::even(cfg.num_heads, ctx.world_size(), "number of attention heads");
  const tp::ShardLayout kv = llama_kv_head_layout(cfg, ctx.world_size());
  local_heads_ = heads.local_size();
  local_kv_heads_ = kv.local_size();
  scale_ = 1.0 / std::sqrt(static_cast<double>(d));
  options_.sliding_window = cfg.sliding_window;  // Mistral: every layer slides
  const bool b = cfg.attention_bias;
  q_proj = register_module("q_proj",
                           std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, heads.scaled(d), false, opts));
  k_proj =
      register_module("k_proj", std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, kv.scaled(d), false, opts));
  v_proj =
      register_module("v_proj", std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, kv.scaled(d), false, opts));
  o_proj = register_module("o_proj", std::make_shared<tp::RowParallelLinear>(hidden, b && cfg.attention_out_bias, ctx,
                                                                             heads.scaled(d), opts));
  points = std::make_unique<AttentionPoints>(*this, ctx, heads, kv, d);
}

at::Tensor LlamaAttention::forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) {
  return invoke(x, [&](const at::Tensor& h) {
    const int64_t t = h.size(0);
    const std::vector<at::Tensor> qkv = tp::forward_together(h, {q_proj.get(), k_proj.get(), v_proj.get()});
    at::Tensor q = kernels::reshaped(qkv[0], {t, local_heads_, head_dim_});     // [T, heads, d]
    at::Tensor k = kernels::reshaped(qkv[1], {t, local_kv_heads_, head_dim_});  // [T, kv, d]
    at::Tensor v = kernels::reshaped(qkv[2], {t, local_kv_heads_, head_dim_});
    // Rotated copies where hooks saw the projections' outputs (those stay as
    // the hooks saw them); otherwise no one else holds the outputs, and they
    // are rotated in place (two copies fewer per layer and step).
    if (rotary_ != nullptr) {  // SmolLM3's NoPE layers have none
      if (q_proj->has_hooks()) q = q.clone();
      if (k_proj->has_hooks()) k = k.clone();
      rotary_->apply_qk_(q, k, meta.positions);
    }
    at::Tensor o = points->attend(q, k, v, kv, meta, scale_, options_);  // [T, heads, d]
    return o_proj->forward(kernels::reshaped(o, {t, local_heads_ * head_dim_}));
  });
}

LlamaMLP::LlamaMLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
    : Module(type_prefix(cfg) + "MLP") {
  const tp::ShardLayout cols =
      tp::ShardLayout::even(cfg.intermediate_size, ctx.world_size(), "intermediate (MLP) size");
  const bool b = cfg.mlp_bias;
  gate_proj = register_module("gate_proj",
                              std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, b, ctx, cols, false, opts));
  up_proj = register_module("up_proj",
                            std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, b, ctx, cols, false, opts));
  down_proj =
      register_module("down_proj", std::make_shared<tp::RowParallelLinear>(cfg.hidden_size, b, ctx, cols, opts));
  act_fn = register_module("act_fn", std::make_shared<Activation>(Activation::parse(cfg.hidden_act)));
  // The activation runs on gate_proj's split output: its values are split alike.
  act_fn->set_input_sharding(tp::last_dim_sharding(ctx, cols));
  act_fn->set_output_sharding(tp::last_dim_sharding(ctx, cols));
}

at::Tensor LlamaMLP::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& h) {
    const std::vector<at::Tensor> gu = tp::forward_together(h, {gate_proj.get(), up_proj.get()});
    return down_proj->forward(act_fn->forward_gated(gu[0], gu[1]));
  });
}

LlamaDecoderLayer::LlamaDecoderLayer(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts,
                                     std::shared_ptr<const kernels::RotaryEmbedding> rotary)
    : Module(type_prefix(cfg) + "DecoderLayer") {
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(cfg, ctx, opts, std::move(rotary)));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(cfg, ctx, opts));
  input_layernorm = register_module(
      "input_layernorm", std::make_shared<RMSNorm>(type_prefix(cfg) + "RMSNorm", cfg.hidden_size, cfg.norm_eps, opts));
  post_attention_layernorm =
      register_module("post_attention_layernorm",
                      std::make_shared<RMSNorm>(type_prefix(cfg) + "RMSNorm", cfg.hidden_size, cfg.norm_eps, opts));
  resid_mid = register_module("resid_mid", std::make_shared<HookPoint>());
}

at::Tensor LlamaDecoderLayer::forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) {
  return invoke(x, [&](const at::Tensor& h) {
    if (resid_mid->has_hooks()) {
      at::Tensor mid = resid_mid->forward(kernels::add(h, self_attn->forward(input_layernorm->forward(h), meta, kv)));
      return kernels::add(mid, mlp->forward(post_attention_layernorm->forward(mid)));
    }
    auto [mid, normed] =
        post_attention_layernorm->add_then_forward(h, self_attn->forward(input_layernorm->forward(h), meta, kv));
    return kernels::add(mid, mlp->forward(normed));
  });
}

LlamaModel::LlamaModel(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
    : Module(type_prefix(cfg) + "Model"), max_position_(cfg.max_position) {
  auto rotary = std::make_shared<const kernels::RotaryEmbedding>(cfg.head_dim, cfg.max_position, cfg.rope_theta,
                                                                 cfg.rope_scaling);
  embed_tokens = register_module(
      "embed_tokens", std::make_shared<tp::VocabParallelEmbedding>(cfg.vocab_size, cfg.hidden_size, ctx, opts));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    auto layer = std::make_shared<LlamaDecoderLayer>(cfg, ctx, opts, cfg.layer_rotates(i) ? rotary : nullptr);
    layers->push_back(layer);
    layer_ptrs.push_back(layer);
  }
  norm = register_module("norm",
                         std::make_shared<RMSNorm>(type_prefix(cfg) + "RMSNorm", cfg.hidden_size, cfg.norm_eps, opts));
}

at::Tensor LlamaModel::forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv) {
  TORCH_CHECK(static_cast<int64_t>(kv.size()) == static_cast<int64_t>(layer_ptrs.size()),
              "LlamaModel: need one KV cache per layer");
  TORCH_CHECK(meta.max_context_len <= max_position_, "LlamaModel: context of ", meta.max_context_len,
              " tokens exceeds the model's ", max_position_, " positions");
  return invoke(tokens, [&](const at::Tensor& ids) {
    at::Tensor h = embed_tokens->forward(ids);  // [T, hidden]
    for (size_t i = 0; i < layer_ptrs.size(); ++i) h = layer_ptrs[i]->forward(h, meta, kv[i]);
    return norm->forward(h);
  });
}

LlamaForCausalLM::LlamaForCausalLM(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                   const at::TensorOptions& opts)
    : CausalLM(type_prefix(cfg) + "ForCausalLM", cfg, ctx, opts) {
  model = register_module("model", std::make_shared<LlamaModel>(config_, ctx_, options_));
  lm_head = register_module(
      "lm_head", std::make_shared<tp::ParallelLMHead>(config_.vocab_size, config_.hidden_size, ctx_, options_));
  if (config_.tie_word_embeddings) lm_head->tie_to(*model->embed_tokens);
  assign_paths("");
}

at::Tensor LlamaForCausalLM::forward(const at::Tensor& tokens, const batching::BatchMeta& meta,
                                     std::vector<KVCache>& kv) {
  return model->forward(tokens, meta, kv);
}

at::Tensor LlamaForCausalLM::compute_logits(const at::Tensor& hidden, const at::Tensor& rows) {
  return lm_head->forward(hidden.index_select(0, rows)).to(at::kFloat);
}

int64_t LlamaForCausalLM::local_kv_heads() const { return model->layer_ptrs.front()->self_attn->local_kv_heads(); }

}  // namespace nnsight
