// Shared layers of the rotary decoder architectures (Qwen3, Gemma 1/2/3,
// GPT-NeoX, OLMo-2, Phi-3, Mixtral): one attention module and one gated MLP
// configurable to each family's Hugging Face names and math, a decoder-layer
// base, the embedding -> layers -> final norm stack, and the causal-LM root.
// Each architecture's own file (qwen3.cpp, gemma.cpp, ...) assembles them
// into its decoder layer, in its own order, under Hugging Face module names.
#pragma once

#include <torch/nn/modules/container/modulelist.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/paged_attention.h"
#include "core/kernels/rotary.h"
#include "models/activation.h"
#include "models/attention_points.h"
#include "models/causal_lm.h"
#include "models/norms.h"
#include "tp/parallel_embedding.h"
#include "tp/parallel_linear.h"

namespace nnsight {

// How one architecture's attention is spelled and computed.
struct AttentionSpec {
  std::string type_name;  // Hugging Face class name ("Qwen3Attention")
  // Projections: separate q/k/v (q_proj, k_proj, v_proj); Phi-3's fused
  // [q | k | v] rows (qkv_proj); GPT-NeoX's fused rows interleaved per head
  // ([q_h | k_h | v_h] for each head h, query_key_value).
  enum class Qkv { kSeparate, kFused, kFusedPerHead } qkv = Qkv::kSeparate;
  std::string fused_name = "qkv_proj";
  std::string out_name = "o_proj";
  bool qkv_bias = false;
  bool out_bias = false;
  // q/k norms: per head over head_dim (Qwen3, Gemma 3) or over the whole
  // projection (OLMo-2), named q_norm / k_norm.
  enum class QkNorm { kNone, kPerHead, kWhole } qk_norm = QkNorm::kNone;
  std::string norm_type = "RMSNorm";
  bool norm_unit_offset = false;      // Gemma: (1 + w)
  double scale = 0.0;                 // softmax scale; 0 = 1 / sqrt(head_dim)
  kernels::AttentionOptions options;  // this layer's window and soft-cap
  std::shared_ptr<const kernels::RotaryEmbedding> rotary;
};

// Every rank's KV heads (llama_kv_head_layout).
tp::ShardLayout kv_head_layout(const ModelConfig& cfg, int world);

class RotaryAttention : public Module {
 public:
  RotaryAttention(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                  AttentionSpec spec);
  // [T, hidden] -> [T, hidden]; hooks see the Hugging Face tuple (attn_output, None).
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv);
  int64_t local_kv_heads() const { return local_kv_heads_; }

  std::shared_ptr<tp::ColumnParallelLinear> q_proj, k_proj, v_proj, fused;  // fused: qkv_proj / query_key_value
  std::shared_ptr<tp::RowParallelLinear> o_proj;
  std::shared_ptr<RMSNorm> q_norm, k_norm;
  std::unique_ptr<AttentionPoints> points;  // q, k, v, scores, pattern, z

 private:
  AttentionSpec spec_;
  tp::ParallelContext ctx_;
  int64_t head_dim_, local_heads_, local_kv_heads_;
  tp::ShardLayout heads_, kv_;
};

// down(act(gate(x)) * up(x)) with gate_proj, up_proj, down_proj, act_fn, or
// Phi-3's fused gate_up_proj ([gate | up] rows) and activation_fn.
struct MlpSpec {
  std::string type_name;
  bool fused_gate_up = false;
  std::string act_name = "act_fn";
  bool bias = false;
  int64_t intermediate = 0;  // 0 = cfg.intermediate_size
};

// A feed-forward block: [T, hidden] -> [T, hidden].
class FeedForward : public Module {
 public:
  using Module::Module;
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }
};

class GatedMLP : public FeedForward {
 public:
  GatedMLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts, MlpSpec spec);
  at::Tensor forward(const at::Tensor& x) override;  // [T, hidden] -> [T, hidden]

  std::shared_ptr<tp::ColumnParallelLinear> gate_proj, up_proj, gate_up_proj;
  std::shared_ptr<tp::RowParallelLinear> down_proj;
  std::shared_ptr<Activation> act_fn;

 private:
  int64_t local_cols_ = 0;
};

class DecoderLayer : public Module {
 public:
  using Module::Module;
  // Residual stream in, residual stream out: [T, hidden].
  virtual at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) = 0;
  virtual int64_t local_kv_heads() const = 0;
};

// Llama's order: h = x + self_attn(input_layernorm(x)); h + mlp(post_attention_layernorm(h)).
// `mlp_name`: "mlp", or Mixtral's "block_sparse_moe".
class PreNormDecoderLayer : public DecoderLayer {
 public:
  PreNormDecoderLayer(std::string type_name, std::shared_ptr<Norm> input_layernorm,
                      std::shared_ptr<RotaryAttention> self_attn, std::shared_ptr<Norm> post_attention_layernorm,
                      const std::string& mlp_name, std::shared_ptr<FeedForward> mlp);
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) override;
  int64_t local_kv_heads() const override { return self_attn->local_kv_heads(); }

  std::shared_ptr<Norm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<RotaryAttention> self_attn;
  std::shared_ptr<FeedForward> mlp;
  std::shared_ptr<HookPoint> resid_mid;  // [T, hidden]: x + self_attn(...), the MLP's residual
};

// embed -> (scale) -> layers -> final norm, under the given names.
struct StackSpec {
  std::string type_name;  // "Qwen3Model"
  std::string embed_name = "embed_tokens";
  std::string norm_name = "norm";
  double embed_scale = 0.0;  // Gemma: sqrt(hidden), rounded to the activation dtype; 0 = none
  // Gemma 3 scales inside the embedding module (its hooks see scaled rows),
  // Gemma 1/2 after it; the embedding's class name when inside.
  std::string scaled_embed_type;
};

class DecoderStack : public Module {
 public:
  DecoderStack(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts, StackSpec spec,
               const std::function<std::shared_ptr<DecoderLayer>(int64_t)>& make_layer,
               std::shared_ptr<Norm> final_norm);
  // tokens [T] -> [T, hidden] after the final norm.
  at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv);
  // The same in two parts, for a base that embeds before calling the stack
  // (LanguageModelBase): tokens [T] -> embeddings [T, hidden], scaled where
  // the architecture scales them; then embeddings -> [T, hidden] after the
  // final norm, with this module's hooks around it.
  at::Tensor embed_tokens(const at::Tensor& tokens);
  at::Tensor forward_embedded(const at::Tensor& h, const batching::BatchMeta& meta, std::vector<KVCache>& kv);

  std::shared_ptr<tp::VocabParallelEmbedding> embed;
  torch::nn::ModuleList layers;
  std::vector<std::shared_ptr<DecoderLayer>> layer_ptrs;
  std::shared_ptr<Norm> norm;

 private:
  void check_step(const batching::BatchMeta& meta, const std::vector<KVCache>& kv) const;
  at::Tensor layers_and_norm(at::Tensor h, const batching::BatchMeta& meta, std::vector<KVCache>& kv);

  StackSpec spec_;
  int64_t max_position_;
};

struct CausalLMSpec {
  std::string type_name;              // "Qwen3ForCausalLM"
  std::string stack_name = "model";   // "gpt_neox"
  std::string head_name = "lm_head";  // "embed_out"
  // "Gemma3Model": a multimodal model's base module of this type sits at
  // stack_name and holds the stack as `language_model` (its only part here).
  std::string base_type;
};

// A multimodal model's base (Gemma3Model) with only its language model:
// tokens [T] -> [T, hidden], the stack's output, with the base's own hooks.
// As in transformers, it embeds the tokens (language_model.embed_tokens)
// and then calls the language model on the embeddings.
class LanguageModelBase : public Module {
 public:
  LanguageModelBase(std::string type_name, std::shared_ptr<DecoderStack> language_model);
  at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv);

  std::shared_ptr<DecoderStack> language_model;
};

class DecoderForCausalLM : public CausalLM {
 public:
  DecoderForCausalLM(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                     CausalLMSpec spec,
                     const std::function<std::shared_ptr<DecoderStack>(const ModelConfig&, const tp::ParallelContext&,
                                                                       const at::TensorOptions&)>& make_stack);
  at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv) override;
  // Applies final_logit_softcap when the config has one.
  at::Tensor compute_logits(const at::Tensor& hidden, const at::Tensor& rows) override;
  int64_t local_kv_heads() const override;

  std::shared_ptr<DecoderStack> stack;
  std::shared_ptr<LanguageModelBase> base;  // null unless spec.base_type is set; then it holds `stack`
  std::shared_ptr<tp::ParallelLMHead> lm_head;
};

// The rotary embedding of a config: rotary_dim (or head_dim) features,
// rope_theta (or `theta` when given) and the config's scaling.
std::shared_ptr<const kernels::RotaryEmbedding> make_rotary(const ModelConfig& cfg, double theta = 0.0,
                                                            bool scaled = true);

// This layer's attention options from the config (window, soft-cap).
kernels::AttentionOptions attention_options(const ModelConfig& cfg, int64_t layer);

}  // namespace nnsight
