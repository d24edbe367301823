// Gemma, Gemma 2 and Gemma 3 text (Hugging Face GemmaForCausalLM,
// Gemma2ForCausalLM, Gemma3ForCausalLM). Common to all three: embeddings
// times sqrt(hidden) (rounded to the activation dtype), RMSNorm by (1 + w),
// GeGLU MLP with tanh GELU, tied LM head. Gemma 2 adds a norm after the
// attention and around the MLP (pre/post_feedforward_layernorm), attention
// and final logit soft-capping, the softmax scale query_pre_attn_scalar^-1/2
// and a sliding window on even layers; Gemma 3 adds per-head q/k norms, its
// own sliding-window pattern and a separate rope base for sliding layers.
// Paths: model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q_proj,k_proj,v_proj,[q_norm,k_norm],o_proj},
// post_attention_layernorm, [pre_feedforward_layernorm,
// post_feedforward_layernorm], mlp.{gate_proj,up_proj,down_proj,act_fn}},
// model.norm, lm_head.
#include <ATen/ATen.h>

#include <cmath>

#include "models/architectures.h"
#include "models/decoder.h"

namespace nnsight {

namespace {

// Gemma 2 / 3: norms after the attention and around the MLP.
class SandwichDecoderLayer : public DecoderLayer {
 public:
  SandwichDecoderLayer(const std::string& prefix, const ModelConfig& cfg, const at::TensorOptions& opts,
                       std::shared_ptr<RotaryAttention> attn, std::shared_ptr<FeedForward> ff)
      : DecoderLayer(prefix + "DecoderLayer") {
    auto norm = [&] {
      return std::make_shared<RMSNorm>(prefix + "RMSNorm", cfg.hidden_size, cfg.norm_eps, opts, true);
    };
    self_attn = register_module("self_attn", std::move(attn));
    mlp = register_module("mlp", std::move(ff));
    input_layernorm = register_module("input_layernorm", norm());
    post_attention_layernorm = register_module("post_attention_layernorm", norm());
    pre_feedforward_layernorm = register_module("pre_feedforward_layernorm", norm());
    post_feedforward_layernorm = register_module("post_feedforward_layernorm", norm());
    resid_mid = register_module("resid_mid", std::make_shared<HookPoint>());
  }
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) override {
    return invoke(x, [&](const at::Tensor& h) {
      at::Tensor mid = resid_mid->forward(
          h + post_attention_layernorm->forward(self_attn->forward(input_layernorm->forward(h), meta, kv)));
      return mid + post_feedforward_layernorm->forward(mlp->forward(pre_feedforward_layernorm->forward(mid)));
    });
  }
  int64_t local_kv_heads() const override { return self_attn->local_kv_heads(); }

  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;
  std::shared_ptr<RotaryAttention> self_attn;
  std::shared_ptr<FeedForward> mlp;
  std::shared_ptr<HookPoint> resid_mid;  // [T, hidden]: the residual between attention and MLP
};

}  // namespace

std::shared_ptr<CausalLM> make_gemma(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts) {
  const std::string& arch = cfg.architecture;
  const std::string prefix = arch == "gemma" ? "Gemma" : arch == "gemma2" ? "Gemma2" : "Gemma3";
  auto stack = [&](const ModelConfig& c, const tp::ParallelContext& x, const at::TensorOptions& o) {
    auto global_rope = make_rotary(c);
    // Gemma 3's sliding layers turn at their own base, unscaled.
    auto local_rope = c.rope_local_theta > 0 ? make_rotary(c, c.rope_local_theta, false) : global_rope;
    auto layer = [&](int64_t i) -> std::shared_ptr<DecoderLayer> {
      AttentionSpec a;
      a.type_name = prefix + "Attention";
      a.qkv_bias = a.out_bias = c.attention_bias;
      if (c.query_pre_attn_scalar > 0) a.scale = 1.0 / std::sqrt(c.query_pre_attn_scalar);
      a.options = attention_options(c, i);
      a.rotary = c.layer_slides(i) ? local_rope : global_rope;
      if (c.architecture == "gemma3_text") {
        a.qk_norm = AttentionSpec::QkNorm::kPerHead;
        a.norm_type = "Gemma3RMSNorm";
        a.norm_unit_offset = true;
      }
      MlpSpec m;
      m.type_name = prefix + "MLP";
      auto attn = std::make_shared<RotaryAttention>(c, x, o, a);
      auto mlp = std::make_shared<GatedMLP>(c, x, o, m);
      if (c.architecture == "gemma") {
        return std::make_shared<PreNormDecoderLayer>(
            "GemmaDecoderLayer", std::make_shared<RMSNorm>("GemmaRMSNorm", c.hidden_size, c.norm_eps, o, true), attn,
            std::make_shared<RMSNorm>("GemmaRMSNorm", c.hidden_size, c.norm_eps, o, true), "mlp", mlp);
      }
      return std::make_shared<SandwichDecoderLayer>(prefix, c, o, attn, mlp);
    };
    StackSpec s;
    s.type_name = prefix + (c.architecture == "gemma3_text" ? "TextModel" : "Model");
    s.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
    if (c.architecture == "gemma3_text") s.scaled_embed_type = "Gemma3TextScaledWordEmbedding";
    return std::make_shared<DecoderStack>(
        c, x, o, s, layer, std::make_shared<RMSNorm>(prefix + "RMSNorm", c.hidden_size, c.norm_eps, o, true));
  };
  CausalLMSpec spec{prefix + "ForCausalLM"};
  if (cfg.multimodal == "gemma3") {
    // transformers' tree for the checkpoint: model.language_model.layers.N, lm_head.
    spec.type_name = "Gemma3ForConditionalGeneration";
    spec.base_type = "Gemma3Model";
  }
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts, spec, stack);
}

}  // namespace nnsight
