#include "models/gpt2.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/kernels/paged_attention.h"
#include "tp/sharding.h"

namespace nnsight {

GPT2Attention::GPT2Attention(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
    : Module("GPT2Attention"), head_dim_(cfg.head_dim) {
  set_output_tuple_size(2);
  const int64_t hidden = cfg.hidden_size, d = cfg.head_dim;
  const tp::ShardLayout heads = tp::ShardLayout::even(cfg.num_heads, ctx.world_size(), "number of attention heads");
  local_heads_ = heads.local_size();
  scale_ = 1.0 / std::sqrt(static_cast<double>(d));
  // The fused weight's rows are [q (hidden) | k (hidden) | v (hidden)]; each
  // rank takes its heads' rows from each third (its output is [q | k | v] of
  // its heads; gathered, the whole comes back in the unsharded order).
  const tp::ShardLayout qkv = tp::ShardLayout::from(3 * hidden, ctx.world_size(), [&](int r) {
    const tp::RowRange h = heads.ranges(r).front();
    std::vector<tp::RowRange> rows;
    for (int64_t part = 0; part < 3; ++part) rows.push_back({part * hidden + h.start * d, h.length * d});
    return rows;
  });
  c_attn = register_module("c_attn", std::make_shared<tp::ColumnParallelLinear>(hidden, true, ctx, qkv, false, opts));
  c_proj = register_module("c_proj", std::make_shared<tp::RowParallelLinear>(hidden, true, ctx, heads.scaled(d), opts));
  points = std::make_unique<AttentionPoints>(*this, ctx, heads, heads, d);
}

at::Tensor GPT2Attention::forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) {
  return invoke(x, [&](const at::Tensor& h) {
    const int64_t t = h.size(0), local = local_heads_ * head_dim_;
    at::Tensor qkv = c_attn->forward(h);  // [T, 3 * local]
    at::Tensor q = qkv.narrow(1, 0, local).reshape({t, local_heads_, head_dim_});
    at::Tensor k = qkv.narrow(1, local, local).reshape({t, local_heads_, head_dim_});
    at::Tensor v = qkv.narrow(1, 2 * local, local).reshape({t, local_heads_, head_dim_});
    at::Tensor o = points->attend(q, k, v, kv, meta, scale_, {});  // [T, heads, d]
    return c_proj->forward(o.reshape({t, local}));
  });
}

GPT2MLP::GPT2MLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
    : Module("GPT2MLP") {
  const tp::ShardLayout cols =
      tp::ShardLayout::even(cfg.intermediate_size, ctx.world_size(), "intermediate (MLP) size");
  c_fc = register_module("c_fc",
                         std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, true, ctx, cols, false, opts));
  act = register_module("act", std::make_shared<Activation>(Activation::parse(cfg.hidden_act)));
  // The activation runs on c_fc's split output: its values are split alike.
  act->set_input_sharding(tp::last_dim_sharding(ctx, cols));
  act->set_output_sharding(tp::last_dim_sharding(ctx, cols));
  c_proj = register_module("c_proj", std::make_shared<tp::RowParallelLinear>(cfg.hidden_size, true, ctx, cols, opts));
}

at::Tensor GPT2MLP::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& h) { return c_proj->forward(act->forward(c_fc->forward(h))); });
}

GPT2Block::GPT2Block(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
    : Module("GPT2Block") {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(cfg.hidden_size, cfg.norm_eps, opts));
  attn = register_module("attn", std::make_shared<GPT2Attention>(cfg, ctx, opts));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(cfg.hidden_size, cfg.norm_eps, opts));
  mlp = register_module("mlp", std::make_shared<GPT2MLP>(cfg, ctx, opts));
  resid_mid = register_module("resid_mid", std::make_shared<HookPoint>());
}

at::Tensor GPT2Block::forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) {
  return invoke(x, [&](const at::Tensor& h) {
    at::Tensor mid = resid_mid->forward(h + attn->forward(ln_1->forward(h), meta, kv));
    return mid + mlp->forward(ln_2->forward(mid));
  });
}

GPT2Model::GPT2Model(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
    : Module("GPT2Model") {
  wte =
      register_module("wte", std::make_shared<tp::VocabParallelEmbedding>(cfg.vocab_size, cfg.hidden_size, ctx, opts));
  wpe = register_module("wpe", std::make_shared<Embedding>(cfg.max_position, cfg.hidden_size, opts));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    auto block = std::make_shared<GPT2Block>(cfg, ctx, opts);
    h->push_back(block);
    block_ptrs.push_back(block);
  }
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(cfg.hidden_size, cfg.norm_eps, opts));
}

at::Tensor GPT2Model::forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv) {
  TORCH_CHECK(kv.size() == block_ptrs.size(), "GPT2Model: need one KV cache per layer");
  TORCH_CHECK(meta.max_context_len <= wpe->num_embeddings(), "GPT2Model: context of ", meta.max_context_len,
              " tokens exceeds the model's ", wpe->num_embeddings(), " positions");
  return invoke(tokens, [&](const at::Tensor& ids) {
    at::Tensor x = wte->forward(ids) + wpe->forward(meta.positions);  // [T, hidden]
    for (size_t i = 0; i < block_ptrs.size(); ++i) x = block_ptrs[i]->forward(x, meta, kv[i]);
    return ln_f->forward(x);
  });
}

GPT2LMHeadModel::GPT2LMHeadModel(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
    : CausalLM("GPT2LMHeadModel", cfg, ctx, opts) {
  transformer = register_module("transformer", std::make_shared<GPT2Model>(config_, ctx_, options_));
  lm_head = register_module(
      "lm_head", std::make_shared<tp::ParallelLMHead>(config_.vocab_size, config_.hidden_size, ctx_, options_));
  if (config_.tie_word_embeddings) lm_head->tie_to(*transformer->wte);
  assign_paths("");
}

at::Tensor GPT2LMHeadModel::forward(const at::Tensor& tokens, const batching::BatchMeta& meta,
                                    std::vector<KVCache>& kv) {
  return transformer->forward(tokens, meta, kv);
}

at::Tensor GPT2LMHeadModel::compute_logits(const at::Tensor& hidden, const at::Tensor& rows) {
  return lm_head->forward(hidden.index_select(0, rows)).to(at::kFloat);
}

int64_t GPT2LMHeadModel::local_kv_heads() const { return transformer->block_ptrs.front()->attn->local_heads(); }

}  // namespace nnsight
