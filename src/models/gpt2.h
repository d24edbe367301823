// GPT-2 architecture: learned position embeddings, LayerNorm, fused QKV
// projection, tanh-GELU MLP, tied LM head. Module paths follow Hugging Face's
// GPT2LMHeadModel: transformer.{wte, wpe, h.N.{ln_1, attn.{c_attn, c_proj},
// ln_2, mlp.{c_fc, act, c_proj}}, ln_f}, lm_head.
#pragma once

#include <torch/nn/modules/container/modulelist.h>

#include <memory>

#include "models/activation.h"
#include "models/causal_lm.h"
#include "models/embedding.h"
#include "models/norms.h"
#include "models/attention_points.h"
#include "tp/parallel_embedding.h"
#include "tp/parallel_linear.h"

namespace nnsight {

class GPT2Attention : public Module {
 public:
  GPT2Attention(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  // [T, hidden] -> [T, hidden]; hooks see the tuple (attn_output, None).
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv);
  int64_t local_heads() const { return local_heads_; }

  std::shared_ptr<tp::ColumnParallelLinear> c_attn;  // local rows: [q | k | v] of this rank's heads
  std::shared_ptr<tp::RowParallelLinear> c_proj;
  std::unique_ptr<AttentionPoints> points;  // q, k, v, scores, pattern, z

 private:
  int64_t head_dim_, local_heads_;
  double scale_;
};

class GPT2MLP : public Module {
 public:
  GPT2MLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  at::Tensor forward(const at::Tensor& x);
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }

  std::shared_ptr<tp::ColumnParallelLinear> c_fc;
  std::shared_ptr<Activation> act;
  std::shared_ptr<tp::RowParallelLinear> c_proj;
};

class GPT2Block : public Module {
 public:
  GPT2Block(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv);  // residual stream

  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<GPT2Attention> attn;
  std::shared_ptr<GPT2MLP> mlp;
  std::shared_ptr<HookPoint> resid_mid;  // [T, hidden]: x + attn(ln_1(x))
};

class GPT2Model : public Module {
 public:
  GPT2Model(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv);

  std::shared_ptr<tp::VocabParallelEmbedding> wte;
  std::shared_ptr<Embedding> wpe;
  torch::nn::ModuleList h;
  std::vector<std::shared_ptr<GPT2Block>> block_ptrs;
  std::shared_ptr<LayerNorm> ln_f;
};

class GPT2LMHeadModel : public CausalLM {
 public:
  GPT2LMHeadModel(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts);
  at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv) override;
  at::Tensor compute_logits(const at::Tensor& hidden, const at::Tensor& rows) override;
  int64_t local_kv_heads() const override;

  std::shared_ptr<GPT2Model> transformer;
  std::shared_ptr<tp::ParallelLMHead> lm_head;
};

}  // namespace nnsight
