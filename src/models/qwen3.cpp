// Qwen3 (Hugging Face Qwen3ForCausalLM): Llama's layer with an RMSNorm over
// each head's query and key (self_attn.q_norm / k_norm, before the rotary
// embedding). Paths: model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q_proj,k_proj,v_proj,q_norm,k_norm,o_proj},
// post_attention_layernorm, mlp.{gate_proj,up_proj,down_proj,act_fn}},
// model.norm, lm_head.
#include "models/architectures.h"
#include "models/decoder.h"

namespace nnsight {

std::shared_ptr<CausalLM> make_qwen3(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                     const at::TensorOptions& opts) {
  auto stack = [](const ModelConfig& c, const tp::ParallelContext& x, const at::TensorOptions& o) {
    auto rotary = make_rotary(c);
    auto layer = [&](int64_t i) -> std::shared_ptr<DecoderLayer> {
      AttentionSpec a;
      a.type_name = "Qwen3Attention";
      a.qkv_bias = a.out_bias = c.attention_bias;
      a.qk_norm = AttentionSpec::QkNorm::kPerHead;
      a.norm_type = "Qwen3RMSNorm";
      a.options = attention_options(c, i);
      a.rotary = rotary;
      MlpSpec m;
      m.type_name = "Qwen3MLP";
      return std::make_shared<PreNormDecoderLayer>(
          "Qwen3DecoderLayer", std::make_shared<RMSNorm>("Qwen3RMSNorm", c.hidden_size, c.norm_eps, o),
          std::make_shared<RotaryAttention>(c, x, o, a),
          std::make_shared<RMSNorm>("Qwen3RMSNorm", c.hidden_size, c.norm_eps, o), "mlp",
          std::make_shared<GatedMLP>(c, x, o, m));
    };
    StackSpec s;
    s.type_name = "Qwen3Model";
    return std::make_shared<DecoderStack>(c, x, o, s, layer,
                                          std::make_shared<RMSNorm>("Qwen3RMSNorm", c.hidden_size, c.norm_eps, o));
  };
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts, CausalLMSpec{"Qwen3ForCausalLM"}, stack);
}

}  // namespace nnsight
