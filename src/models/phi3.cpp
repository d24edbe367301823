// Phi-3 (Hugging Face Phi3ForCausalLM): Llama's layer with fused
// projections, self_attn.qkv_proj (rows [q | k | v]) and mlp.gate_up_proj
// (rows [gate | up]), hookable under those names; long-rope scaling.
// Paths: model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{qkv_proj,o_proj}, post_attention_layernorm,
// mlp.{gate_up_proj,activation_fn,down_proj}}, model.norm, lm_head.
#include "models/architectures.h"
#include "models/decoder.h"

namespace nnsight {

std::shared_ptr<CausalLM> make_phi3(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                    const at::TensorOptions& opts) {
  auto stack = [](const ModelConfig& c, const tp::ParallelContext& x, const at::TensorOptions& o) {
    auto rotary = make_rotary(c);
    auto layer = [&](int64_t i) -> std::shared_ptr<DecoderLayer> {
      AttentionSpec a;
      a.type_name = "Phi3Attention";
      a.qkv = AttentionSpec::Qkv::kFused;
      a.fused_name = "qkv_proj";
      a.options = attention_options(c, i);
      a.rotary = rotary;
      MlpSpec m;
      m.type_name = "Phi3MLP";
      m.fused_gate_up = true;
      m.act_name = "activation_fn";
      return std::make_shared<PreNormDecoderLayer>(
          "Phi3DecoderLayer", std::make_shared<RMSNorm>("Phi3RMSNorm", c.hidden_size, c.norm_eps, o),
          std::make_shared<RotaryAttention>(c, x, o, a),
          std::make_shared<RMSNorm>("Phi3RMSNorm", c.hidden_size, c.norm_eps, o), "mlp",
          std::make_shared<GatedMLP>(c, x, o, m));
    };
    StackSpec s;
    s.type_name = "Phi3Model";
    return std::make_shared<DecoderStack>(c, x, o, s, layer,
                                          std::make_shared<RMSNorm>("Phi3RMSNorm", c.hidden_size, c.norm_eps, o));
  };
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts, CausalLMSpec{"Phi3ForCausalLM"}, stack);
}

}  // namespace nnsight
