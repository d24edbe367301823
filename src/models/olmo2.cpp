// OLMo-2 (Hugging Face Olmo2ForCausalLM): norms after each sublayer
// (h = x + post_attention_layernorm(attn(x)); h + post_feedforward_layernorm(mlp(h))),
// and q/k RMSNorm over the whole projection (all heads together, before
// the split into heads and the rotary embedding; under tensor parallelism
// q_proj/k_proj gather their output for it). Paths: model.embed_tokens,
// model.layers.N.{self_attn.{q_proj,k_proj,v_proj,q_norm,k_norm,o_proj},
// post_attention_layernorm, mlp.{gate_proj,up_proj,down_proj,act_fn},
// post_feedforward_layernorm}, model.norm, lm_head. OLMo 3 (Olmo3ForCausalLM)
// is the same layer with a sliding window on the layers its config names
// and, on those, a rope without the full-attention layers' scaling.
#include "models/architectures.h"
#include "models/decoder.h"

namespace nnsight {

namespace {

class Olmo2DecoderLayer : public DecoderLayer {
 public:
  Olmo2DecoderLayer(const ModelConfig& cfg, const std::string& prefix, const at::TensorOptions& opts,
                    std::shared_ptr<RotaryAttention> attn, std::shared_ptr<FeedForward> ff)
      : DecoderLayer(prefix + "DecoderLayer") {
    self_attn = register_module("self_attn", std::move(attn));
    mlp = register_module("mlp", std::move(ff));
    post_attention_layernorm = register_module(
        "post_attention_layernorm", std::make_shared<RMSNorm>(prefix + "RMSNorm", cfg.hidden_size, cfg.norm_eps, opts));
    post_feedforward_layernorm =
        register_module("post_feedforward_layernorm",
                        std::make_shared<RMSNorm>(prefix + "RMSNorm", cfg.hidden_size, cfg.norm_eps, opts));
    resid_mid = register_module("resid_mid", std::make_shared<HookPoint>());
  }
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) override {
    return invoke(x, [&](const at::Tensor& h) {
      at::Tensor mid = resid_mid->forward(h + post_attention_layernorm->forward(self_attn->forward(h, meta, kv)));
      return mid + post_feedforward_layernorm->forward(mlp->forward(mid));
    });
  }
  int64_t local_kv_heads() const override { return self_attn->local_kv_heads(); }

  std::shared_ptr<RMSNorm> post_attention_layernorm, post_feedforward_layernorm;
  std::shared_ptr<RotaryAttention> self_attn;
  std::shared_ptr<FeedForward> mlp;
  std::shared_ptr<HookPoint> resid_mid;  // [T, hidden]: the residual between attention and MLP
};

}  // namespace

std::shared_ptr<CausalLM> make_olmo2(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts) {
  const std::string prefix = cfg.model_type == "olmo3" ? "Olmo3" : "Olmo2";
  auto stack = [prefix](const ModelConfig& c, const tp::ParallelContext& x, const at::TensorOptions& o) {
    auto rotary = make_rotary(c);
    // OLMo 3's sliding layers: their own base, no scaling.
    auto local_rotary = c.rope_local_theta > 0 ? make_rotary(c, c.rope_local_theta, false) : rotary;
    auto layer = [&](int64_t i) -> std::shared_ptr<DecoderLayer> {
      AttentionSpec a;
      a.type_name = prefix + "Attention";
      a.qkv_bias = a.out_bias = c.attention_bias;
      a.qk_norm = AttentionSpec::QkNorm::kWhole;
      a.norm_type = prefix + "RMSNorm";
      a.options = attention_options(c, i);
      a.rotary = c.layer_slides(i) ? local_rotary : rotary;
      MlpSpec m;
      m.type_name = prefix + "MLP";
      return std::make_shared<Olmo2DecoderLayer>(c, prefix, o, std::make_shared<RotaryAttention>(c, x, o, a),
                                                 std::make_shared<GatedMLP>(c, x, o, m));
    };
    StackSpec s;
    s.type_name = prefix + "Model";
    return std::make_shared<DecoderStack>(c, x, o, s, layer,
                                          std::make_shared<RMSNorm>(prefix + "RMSNorm", c.hidden_size, c.norm_eps, o));
  };
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts, CausalLMSpec{prefix + "ForCausalLM"}, stack);
}

}  // namespace nnsight
