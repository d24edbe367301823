// Qwen3 (Hugging Face Qwen3ForCausalLM): Llama's layer with an RMSNorm over
// each head's query and key (self_attn.q_norm / k_norm, before the rotary
// embedding). Paths: model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q_proj,k_proj,v_proj,q_norm,k_norm,o_proj},
// post_attention_layernorm, mlp.{gate_proj,up_proj,down_proj,act_fn}},
// model.norm, lm_head. Qwen3-MoE (Qwen3MoeForCausalLM) is the same with a
// sparse mixture of experts as `mlp` on its sparse layers: mlp.gate (router
// logits) and mlp.experts.E.{gate_proj,up_proj,down_proj,act_fn}
// (models/sparse_moe.h); the other layers keep a dense Qwen3MoeMLP.
#include "models/architectures.h"
#include "models/decoder.h"
#include "models/sparse_moe.h"

namespace nnsight {

std::shared_ptr<CausalLM> make_qwen3(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts) {
  const std::string prefix = cfg.architecture == "qwen3_moe" ? "Qwen3Moe" : "Qwen3";
  auto stack = [&](const ModelConfig& c, const tp::ParallelContext& x, const at::TensorOptions& o) {
    auto rotary = make_rotary(c);
    auto layer = [&](int64_t i) -> std::shared_ptr<DecoderLayer> {
      AttentionSpec a;
      a.type_name = prefix + "Attention";
      a.qkv_bias = a.out_bias = c.attention_bias;
      a.qk_norm = AttentionSpec::QkNorm::kPerHead;
      a.norm_type = prefix + "RMSNorm";
      a.options = attention_options(c, i);
      a.rotary = rotary;
      std::shared_ptr<FeedForward> ff;
      if (c.layer_is_moe(i)) {
        MoeSpec m{prefix + "SparseMoeBlock", prefix + "MLP",  "gate_proj", "up_proj", "down_proj",
                  c.moe_intermediate_size,   c.norm_topk_prob};
        ff = std::make_shared<SparseMoeBlock>(c, x, o, m);
      } else {
        MlpSpec m;
        m.type_name = prefix + "MLP";
        ff = std::make_shared<GatedMLP>(c, x, o, m);
      }
      return std::make_shared<PreNormDecoderLayer>(
          prefix + "DecoderLayer", std::make_shared<RMSNorm>(prefix + "RMSNorm", c.hidden_size, c.norm_eps, o),
          std::make_shared<RotaryAttention>(c, x, o, a),
          std::make_shared<RMSNorm>(prefix + "RMSNorm", c.hidden_size, c.norm_eps, o), "mlp", ff);
    };
    StackSpec s;
    s.type_name = prefix + "Model";
    return std::make_shared<DecoderStack>(c, x, o, s, layer,
                                          std::make_shared<RMSNorm>(prefix + "RMSNorm", c.hidden_size, c.norm_eps, o));
  };
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts, CausalLMSpec{prefix + "ForCausalLM"}, stack);
}

}  // namespace nnsight
