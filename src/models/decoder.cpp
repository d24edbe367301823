#include "models/decoder.h"

#include <ATen/ATen.h>

#include <cmath>

#include <nnsight/error.hpp>

#include "core/kernels/add.h"
#include "core/kernels/undispatched.h"
#include "models/head_split_sharding.h"
#include "models/llama.h"
#include "tp/sharding.h"

namespace nnsight {

namespace {

// This rank's positions of a whole last dimension (its ranges, concatenated).
at::Tensor take_local(const at::Tensor& whole, const tp::ShardLayout& layout, int rank) {
  const auto& ranges = layout.ranges(rank);
  if (ranges.size() == 1) return whole.narrow(-1, ranges[0].start, ranges[0].length);
  std::vector<at::Tensor> parts;
  for (const auto& r : ranges) parts.push_back(whole.narrow(-1, r.start, r.length));
  return at::cat(parts, -1);
}

}  // namespace

tp::ShardLayout kv_head_layout(const ModelConfig& cfg, int world) { return llama_kv_head_layout(cfg, world); }

std::shared_ptr<const kernels::RotaryEmbedding> make_rotary(const ModelConfig& cfg, double theta, bool scaled) {
  const int64_t dim = cfg.rotary_dim > 0 ? cfg.rotary_dim : cfg.head_dim;
  return std::make_shared<const kernels::RotaryEmbedding>(dim, cfg.max_position, theta > 0 ? theta : cfg.rope_theta,
                                                          scaled ? cfg.rope_scaling : RopeScaling{});
}

kernels::AttentionOptions attention_options(const ModelConfig& cfg, int64_t layer) {
  kernels::AttentionOptions o;
  o.sliding_window = cfg.layer_slides(layer) ? cfg.sliding_window : 0;
  o.logit_softcap = cfg.attn_logit_softcap;
  return o;
}

// ---- attention --------------------------------------------------------------

RotaryAttention::RotaryAttention(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                                 AttentionSpec spec)
    : Module(spec.type_name), spec_(std::move(spec)), ctx_(ctx), head_dim_(cfg.head_dim) {
  TORCH_CHECK(spec_.rotary != nullptr, "RotaryAttention: no rotary embedding");
  set_output_tuple_size(2);
  const int world = ctx.world_size();
  const int64_t d = cfg.head_dim, hidden = cfg.hidden_size, nh = cfg.num_heads, nkv = cfg.num_kv_heads;
  if (spec_.qk_norm == AttentionSpec::QkNorm::kWhole && world > nkv) {
    // The norm needs the whole key projection; ranks sharing a replicated KV head cannot gather it.
    throw ConfigError("tensor-parallel size (" + std::to_string(world) + ") exceeds the number of key/value heads (" +
                      std::to_string(nkv) + "): " + spec_.type_name +
                      "'s k_norm normalizes the whole key projection, which needs each rank to hold its own KV "
                      "heads; use a tensor-parallel size of at most " +
                      std::to_string(nkv));
  }
  heads_ = tp::ShardLayout::even(nh, world, "number of attention heads");
  kv_ = kv_head_layout(cfg, world);
  local_heads_ = heads_.local_size();
  local_kv_heads_ = kv_.local_size();
  if (spec_.scale == 0.0) spec_.scale = 1.0 / std::sqrt(static_cast<double>(d));
  const bool b = spec_.qkv_bias;
  switch (spec_.qkv) {
    case AttentionSpec::Qkv::kSeparate: {
      // Whole-projection q/k norms need every feature: those projections gather.
      const bool gather = spec_.qk_norm == AttentionSpec::QkNorm::kWhole && world > 1;
      q_proj = register_module(
          "q_proj", std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, heads_.scaled(d), gather, opts));
      k_proj = register_module("k_proj",
                               std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, kv_.scaled(d), gather, opts));
      v_proj = register_module("v_proj",
                               std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, kv_.scaled(d), false, opts));
      break;
    }
    case AttentionSpec::Qkv::kFused: {
      // Rows [q (nh * d) | k (nkv * d) | v (nkv * d)]; each rank its heads' rows of each part.
      const tp::ShardLayout rows = tp::ShardLayout::from((nh + 2 * nkv) * d, world, [&](int r) {
        std::vector<tp::RowRange> out;
        for (const auto& h : heads_.ranges(r)) out.push_back({h.start * d, h.length * d});
        for (const auto& h : kv_.ranges(r)) out.push_back({nh * d + h.start * d, h.length * d});
        for (const auto& h : kv_.ranges(r)) out.push_back({(nh + nkv) * d + h.start * d, h.length * d});
        return out;
      });
      fused = register_module(spec_.fused_name,
                              std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, rows, false, opts));
      break;
    }
    case AttentionSpec::Qkv::kFusedPerHead: {
      TORCH_CHECK(nkv == nh, "RotaryAttention: per-head fused q/k/v needs as many KV heads as heads");
      // Rows [q_0 k_0 v_0 | q_1 k_1 v_1 | ...]: a rank's heads are one contiguous range.
      fused = register_module(spec_.fused_name, std::make_shared<tp::ColumnParallelLinear>(
                                                    hidden, b, ctx, heads_.scaled(3 * d), false, opts));
      break;
    }
  }
  o_proj = register_module(
      spec_.out_name, std::make_shared<tp::RowParallelLinear>(hidden, spec_.out_bias, ctx, heads_.scaled(d), opts));
  if (spec_.qk_norm == AttentionSpec::QkNorm::kPerHead) {
    q_norm = register_module("q_norm",
                             std::make_shared<RMSNorm>(spec_.norm_type, d, cfg.norm_eps, opts, spec_.norm_unit_offset));
    k_norm = register_module("k_norm",
                             std::make_shared<RMSNorm>(spec_.norm_type, d, cfg.norm_eps, opts, spec_.norm_unit_offset));
    if (auto flat = tp::last_dim_sharding(ctx, heads_.scaled(d))) {
      auto s = std::make_shared<HeadSplitSharding>(flat, d);
      q_norm->set_input_sharding(s);
      q_norm->set_output_sharding(s);
    }
    if (auto flat = tp::last_dim_sharding(ctx, kv_.scaled(d))) {
      auto s = std::make_shared<HeadSplitSharding>(flat, d);
      k_norm->set_input_sharding(s);
      k_norm->set_output_sharding(s);
    }
  } else if (spec_.qk_norm == AttentionSpec::QkNorm::kWhole) {
    q_norm = register_module(
        "q_norm", std::make_shared<RMSNorm>(spec_.norm_type, nh * d, cfg.norm_eps, opts, spec_.norm_unit_offset));
    k_norm = register_module(
        "k_norm", std::make_shared<RMSNorm>(spec_.norm_type, nkv * d, cfg.norm_eps, opts, spec_.norm_unit_offset));
  }
  points = std::make_unique<AttentionPoints>(*this, ctx, heads_, kv_, d);
}

at::Tensor RotaryAttention::forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) {
  return invoke(x, [&](const at::Tensor& h) {
    const int64_t t = h.size(0), d = head_dim_;
    at::Tensor q, k, v;  // [T, local heads, d], [T, local kv heads, d] x 2
    // The modules whose outputs q and k are (or are views of): hooks may hold those.
    const Module* q_from = fused.get();
    const Module* k_from = fused.get();
    switch (spec_.qkv) {
      case AttentionSpec::Qkv::kSeparate: {
        q = q_proj->forward(h);  // [T, local_heads * d], or [T, heads * d] when gathered
        k = k_proj->forward(h);
        v = v_proj->forward(h);
        q_from = q_proj.get();
        k_from = k_proj.get();
        if (spec_.qk_norm == AttentionSpec::QkNorm::kWhole) {
          q = q_norm->forward(q);
          k = k_norm->forward(k);
          q_from = q_norm.get();
          k_from = k_norm.get();
          if (!ctx_.single()) {
            q = take_local(q, heads_.scaled(d), ctx_.rank());
            k = take_local(k, kv_.scaled(d), ctx_.rank());
          }
        }
        break;
      }
      case AttentionSpec::Qkv::kFused: {
        at::Tensor qkv = fused->forward(h);  // [T, (local_heads + 2 * local_kv) * d]
        q = qkv.narrow(1, 0, local_heads_ * d);
        k = qkv.narrow(1, local_heads_ * d, local_kv_heads_ * d);
        v = qkv.narrow(1, (local_heads_ + local_kv_heads_) * d, local_kv_heads_ * d);
        break;
      }
      case AttentionSpec::Qkv::kFusedPerHead: {
        at::Tensor qkv = fused->forward(h).view({t, local_heads_, 3 * d});  // [T, local_heads, 3d]
        q = qkv.narrow(2, 0, d);
        k = qkv.narrow(2, d, d);
        v = qkv.narrow(2, 2 * d, d);
        break;
      }
    }
    q = kernels::reshaped(q, {t, local_heads_, d});
    k = kernels::reshaped(k, {t, local_kv_heads_, d});
    v = kernels::reshaped(v, {t, local_kv_heads_, d});
    if (spec_.qk_norm == AttentionSpec::QkNorm::kPerHead) {
      q = q_norm->forward(q);
      k = k_norm->forward(k);
      q_from = q_norm.get();
      k_from = k_norm.get();
    }
    // Rotated copies where a hook saw the tensors (the values it saw stay as
    // they were) or where they are strided views; otherwise no one else holds
    // them, and they are rotated in place (two copies fewer per layer and step).
    if (q_from->has_hooks() || !q.is_contiguous()) q = q.clone(at::MemoryFormat::Contiguous);
    if (k_from->has_hooks() || !k.is_contiguous()) k = k.clone(at::MemoryFormat::Contiguous);
    spec_.rotary->apply_qk_(q, k, meta.positions);
    at::Tensor o = points->attend(q, k, v, kv, meta, spec_.scale, spec_.options);  // [T, heads, d]
    return o_proj->forward(kernels::reshaped(o, {t, local_heads_ * d}));
  });
}

// ---- MLP --------------------------------------------------------------------

GatedMLP::GatedMLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts, MlpSpec spec)
    : FeedForward(spec.type_name) {
  const int64_t inter = spec.intermediate > 0 ? spec.intermediate : cfg.intermediate_size;
  const tp::ShardLayout cols = tp::ShardLayout::even(inter, ctx.world_size(), "intermediate (MLP) size");
  local_cols_ = cols.local_size();
  const int64_t hidden = cfg.hidden_size;
  const bool b = spec.bias;
  if (spec.fused_gate_up) {
    // Rows [gate (inter) | up (inter)]; each rank its columns of both.
    const tp::ShardLayout rows = tp::ShardLayout::from(2 * inter, ctx.world_size(), [&](int r) {
      const tp::RowRange c = cols.ranges(r).front();
      return std::vector<tp::RowRange>{{c.start, c.length}, {inter + c.start, c.length}};
    });
    gate_up_proj =
        register_module("gate_up_proj", std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, rows, false, opts));
  } else {
    gate_proj =
        register_module("gate_proj", std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, cols, false, opts));
    up_proj = register_module("up_proj", std::make_shared<tp::ColumnParallelLinear>(hidden, b, ctx, cols, false, opts));
  }
  down_proj = register_module("down_proj", std::make_shared<tp::RowParallelLinear>(hidden, b, ctx, cols, opts));
  act_fn = register_module(spec.act_name, std::make_shared<Activation>(Activation::parse(cfg.hidden_act)));
  // The activation runs on the split gate columns: its values are split alike.
  act_fn->set_input_sharding(tp::last_dim_sharding(ctx, cols));
  act_fn->set_output_sharding(tp::last_dim_sharding(ctx, cols));
}

at::Tensor GatedMLP::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& h) {
    if (gate_up_proj) {
      at::Tensor gu = gate_up_proj->forward(h);  // [T, 2 * local]
      return down_proj->forward(
          act_fn->forward_gated(gu.narrow(1, 0, local_cols_), gu.narrow(1, local_cols_, local_cols_)));
    }
    const at::Tensor gate = gate_proj->forward(h);  // before up_proj: hooks fire in Hugging Face's order
    return down_proj->forward(act_fn->forward_gated(gate, up_proj->forward(h)));
  });
}

// ---- layers -------------------------------------------------------------------

PreNormDecoderLayer::PreNormDecoderLayer(std::string type_name, std::shared_ptr<Norm> input_ln,
                                         std::shared_ptr<RotaryAttention> attn, std::shared_ptr<Norm> post_ln,
                                         const std::string& mlp_name, std::shared_ptr<FeedForward> ff)
    : DecoderLayer(std::move(type_name)) {
  self_attn = register_module("self_attn", std::move(attn));
  mlp = register_module(mlp_name, std::move(ff));
  input_layernorm = register_module("input_layernorm", std::move(input_ln));
  post_attention_layernorm = register_module("post_attention_layernorm", std::move(post_ln));
  resid_mid = register_module("resid_mid", std::make_shared<HookPoint>());
}

at::Tensor PreNormDecoderLayer::forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) {
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

// ---- stack and root -----------------------------------------------------------

DecoderStack::DecoderStack(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                           StackSpec spec, const std::function<std::shared_ptr<DecoderLayer>(int64_t)>& make_layer,
                           std::shared_ptr<Norm> final_norm)
    : Module(spec.type_name), spec_(std::move(spec)), max_position_(cfg.max_position) {
  const bool inside = !spec_.scaled_embed_type.empty();
  embed = register_module(spec_.embed_name,
                          std::make_shared<tp::VocabParallelEmbedding>(
                              cfg.vocab_size, cfg.hidden_size, ctx, opts, inside ? spec_.embed_scale : 0.0,
                              inside ? spec_.scaled_embed_type : std::string("Embedding")));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    auto layer = make_layer(i);
    layers->push_back(layer);
    layer_ptrs.push_back(layer);
  }
  norm = register_module(spec_.norm_name, std::move(final_norm));
}

void DecoderStack::check_step(const batching::BatchMeta& meta, const std::vector<KVCache>& kv) const {
  TORCH_CHECK(kv.size() == layer_ptrs.size(), type_name(), ": need one KV cache per layer");
  TORCH_CHECK(meta.max_context_len <= max_position_, type_name(), ": context of ", meta.max_context_len,
              " tokens exceeds the model's ", max_position_, " positions");
}

at::Tensor DecoderStack::forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv) {
  check_step(meta, kv);
  return invoke(tokens, [&](const at::Tensor& ids) { return layers_and_norm(embed_tokens(ids), meta, kv); });
}

at::Tensor DecoderStack::embed_tokens(const at::Tensor& tokens) {
  at::Tensor h = embed->forward(tokens);  // [T, hidden]
  // Gemma multiplies by sqrt(hidden) rounded to the activation dtype, as
  // Hugging Face does (rounded on the host: a device scalar's item() would
  // synchronize, which a CUDA graph cannot capture).
  if (spec_.embed_scale != 0.0 && spec_.scaled_embed_type.empty())
    h = h * at::scalar_tensor(spec_.embed_scale, h.options().device(at::kCPU)).item();
  return h;
}

at::Tensor DecoderStack::forward_embedded(const at::Tensor& h, const batching::BatchMeta& meta,
                                          std::vector<KVCache>& kv) {
  check_step(meta, kv);
  return invoke(h, [&](const at::Tensor& x) { return layers_and_norm(x, meta, kv); });
}

at::Tensor DecoderStack::layers_and_norm(at::Tensor h, const batching::BatchMeta& meta, std::vector<KVCache>& kv) {
  for (size_t i = 0; i < layer_ptrs.size(); ++i) h = layer_ptrs[i]->forward(h, meta, kv[i]);
  return norm->forward(h);
}

DecoderForCausalLM::DecoderForCausalLM(
    const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts, CausalLMSpec spec,
    const std::function<std::shared_ptr<DecoderStack>(const ModelConfig&, const tp::ParallelContext&,
                                                      const at::TensorOptions&)>& make_stack)
    : CausalLM(spec.type_name, cfg, ctx, opts) {
  if (spec.base_type.empty()) {
    stack = register_module(spec.stack_name, make_stack(config_, ctx_, options_));
  } else {
    base = register_module(spec.stack_name,
                           std::make_shared<LanguageModelBase>(spec.base_type, make_stack(config_, ctx_, options_)));
    stack = base->language_model;
  }
  lm_head = register_module(
      spec.head_name, std::make_shared<tp::ParallelLMHead>(config_.vocab_size, config_.hidden_size, ctx_, options_));
  if (config_.tie_word_embeddings) lm_head->tie_to(*stack->embed);
  assign_paths("");
}

at::Tensor DecoderForCausalLM::forward(const at::Tensor& tokens, const batching::BatchMeta& meta,
                                       std::vector<KVCache>& kv) {
  return base ? base->forward(tokens, meta, kv) : stack->forward(tokens, meta, kv);
}

LanguageModelBase::LanguageModelBase(std::string type_name, std::shared_ptr<DecoderStack> lm)
    : Module(std::move(type_name)) {
  language_model = register_module("language_model", std::move(lm));
}

at::Tensor LanguageModelBase::forward(const at::Tensor& tokens, const batching::BatchMeta& meta,
                                      std::vector<KVCache>& kv) {
  // As transformers' Gemma3Model: the token embedding first, then the
  // language model on the embeddings (its input hook sees [T, hidden]).
  return invoke(tokens, [&](const at::Tensor& ids) {
    return language_model->forward_embedded(language_model->embed_tokens(ids), meta, kv);
  });
}

at::Tensor DecoderForCausalLM::compute_logits(const at::Tensor& hidden, const at::Tensor& rows) {
  at::Tensor logits = lm_head->forward(hidden.index_select(0, rows)).to(at::kFloat);  // [S, vocab]
  const double cap = config_.final_logit_softcap;
  if (cap > 0.0) logits = at::tanh(logits / cap) * cap;
  return logits;
}

int64_t DecoderForCausalLM::local_kv_heads() const { return stack->layer_ptrs.front()->local_kv_heads(); }

}  // namespace nnsight
