// Llama architecture (also SmolLM2, Llama 2/3, Mistral-style checkpoints):
// RMSNorm, rotary embeddings (rotate-half), grouped-query attention, SwiGLU,
// optionally tied embeddings. Module paths follow Hugging Face's
// LlamaForCausalLM: model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj,
// mlp.act_fn}, model.norm, lm_head.
#pragma once

#include <torch/nn/modules/container/modulelist.h>

#include <memory>

#include "core/kernels/paged_attention.h"
#include "core/kernels/rotary.h"
#include "models/activation.h"
#include "models/attention_points.h"
#include "models/causal_lm.h"
#include "models/norms.h"
#include "tp/parallel_embedding.h"
#include "tp/parallel_linear.h"

namespace nnsight {

// Every rank's KV heads: an even split when there are at least as many KV
// heads as ranks, else one head replicated on world / kv_heads ranks. Throws
// ConfigError naming the counts when neither fits.
tp::ShardLayout llama_kv_head_layout(const ModelConfig& cfg, int world);

class LlamaAttention : public Module {
 public:
  LlamaAttention(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                 std::shared_ptr<const kernels::RotaryEmbedding> rotary);
  // [T, hidden] -> [T, hidden]; hooks see the Hugging Face tuple (attn_output, None).
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv);

  int64_t local_heads() const { return local_heads_; }
  int64_t local_kv_heads() const { return local_kv_heads_; }

  std::shared_ptr<tp::ColumnParallelLinear> q_proj, k_proj, v_proj;
  std::shared_ptr<tp::RowParallelLinear> o_proj;
  std::unique_ptr<AttentionPoints> points;  // q, k, v, scores, pattern, z

 private:
  int64_t head_dim_, local_heads_, local_kv_heads_;
  double scale_;
  kernels::AttentionOptions options_;
  std::shared_ptr<const kernels::RotaryEmbedding> rotary_;
};

class LlamaMLP : public Module {
 public:
  LlamaMLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  at::Tensor forward(const at::Tensor& x);  // [T, hidden] -> [T, hidden]
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }

  std::shared_ptr<tp::ColumnParallelLinear> gate_proj, up_proj;
  std::shared_ptr<tp::RowParallelLinear> down_proj;
  std::shared_ptr<Activation> act_fn;
};

class LlamaDecoderLayer : public Module {
 public:
  LlamaDecoderLayer(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                    std::shared_ptr<const kernels::RotaryEmbedding> rotary);
  // Residual stream in, residual stream out: [T, hidden].
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv);

  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMLP> mlp;
  std::shared_ptr<HookPoint> resid_mid;  // [T, hidden]: x + self_attn(...), the MLP's residual
};

class LlamaModel : public Module {
 public:
  LlamaModel(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  // tokens [T] -> [T, hidden] after the final norm.
  at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv);

  std::shared_ptr<tp::VocabParallelEmbedding> embed_tokens;
  torch::nn::ModuleList layers;
  std::vector<std::shared_ptr<LlamaDecoderLayer>> layer_ptrs;  // typed view of `layers`
  std::shared_ptr<RMSNorm> norm;

 private:
  int64_t max_position_;
};

class LlamaForCausalLM : public CausalLM {
 public:
  LlamaForCausalLM(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv) override;
  at::Tensor compute_logits(const at::Tensor& hidden, const at::Tensor& rows) override;
  int64_t local_kv_heads() const override;

  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<tp::ParallelLMHead> lm_head;
};

}  // namespace nnsight
