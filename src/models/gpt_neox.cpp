// GPT-NeoX / Pythia (Hugging Face GPTNeoXForCausalLM): LayerNorm with bias,
// a fused query_key_value projection whose rows are interleaved per head
// ([q_h | k_h | v_h] for each head h), rotary embeddings on the first
// rotary_pct of each head's features, and (use_parallel_residual) the
// parallel residual x + attention(input_layernorm(x)) + mlp(post_attention_layernorm(x)).
// Paths: gpt_neox.embed_in, gpt_neox.layers.N.{input_layernorm,
// post_attention_layernorm, attention.{query_key_value,dense},
// mlp.{dense_h_to_4h,act,dense_4h_to_h}}, gpt_neox.final_layer_norm, embed_out.
#include "models/architectures.h"
#include "models/decoder.h"
#include "tp/sharding.h"

namespace nnsight {

namespace {

class GPTNeoXMLP : public FeedForward {
 public:
  GPTNeoXMLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
      : FeedForward("GPTNeoXMLP") {
    const tp::ShardLayout cols =
        tp::ShardLayout::even(cfg.intermediate_size, ctx.world_size(), "intermediate (MLP) size");
    dense_h_to_4h = register_module(
        "dense_h_to_4h", std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, true, ctx, cols, false, opts));
    dense_4h_to_h = register_module("dense_4h_to_h",
                                    std::make_shared<tp::RowParallelLinear>(cfg.hidden_size, true, ctx, cols, opts));
    act = register_module("act", std::make_shared<Activation>(Activation::parse(cfg.hidden_act)));
    act->set_input_sharding(tp::last_dim_sharding(ctx, cols));
    act->set_output_sharding(tp::last_dim_sharding(ctx, cols));
  }
  at::Tensor forward(const at::Tensor& x) override {
    return invoke(x,
                  [&](const at::Tensor& h) { return dense_4h_to_h->forward(act->forward(dense_h_to_4h->forward(h))); });
  }
  std::shared_ptr<tp::ColumnParallelLinear> dense_h_to_4h;
  std::shared_ptr<tp::RowParallelLinear> dense_4h_to_h;
  std::shared_ptr<Activation> act;
};

class GPTNeoXLayer : public DecoderLayer {
 public:
  GPTNeoXLayer(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
               std::shared_ptr<RotaryAttention> attn)
      : DecoderLayer("GPTNeoXLayer"), parallel_(cfg.parallel_residual) {
    input_layernorm =
        register_module("input_layernorm", std::make_shared<LayerNorm>(cfg.hidden_size, cfg.norm_eps, opts));
    post_attention_layernorm =
        register_module("post_attention_layernorm", std::make_shared<LayerNorm>(cfg.hidden_size, cfg.norm_eps, opts));
    attention = register_module("attention", std::move(attn));
    mlp = register_module("mlp", std::make_shared<GPTNeoXMLP>(cfg, ctx, opts));
    // A parallel residual has no value between attention and MLP.
    if (!parallel_) resid_mid = register_module("resid_mid", std::make_shared<HookPoint>());
  }
  at::Tensor forward(const at::Tensor& x, const batching::BatchMeta& meta, KVCache& kv) override {
    return invoke(x, [&](const at::Tensor& h) {
      at::Tensor a = attention->forward(input_layernorm->forward(h), meta, kv);
      if (parallel_) return mlp->forward(post_attention_layernorm->forward(h)) + a + h;
      at::Tensor mid = resid_mid->forward(a + h);
      return mlp->forward(post_attention_layernorm->forward(mid)) + mid;
    });
  }
  int64_t local_kv_heads() const override { return attention->local_kv_heads(); }

  std::shared_ptr<LayerNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<RotaryAttention> attention;
  std::shared_ptr<GPTNeoXMLP> mlp;
  std::shared_ptr<HookPoint> resid_mid;  // sequential residual only: [T, hidden]

 private:
  bool parallel_;
};

}  // namespace

std::shared_ptr<CausalLM> make_gpt_neox(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                        const at::TensorOptions& opts) {
  auto stack = [](const ModelConfig& c, const tp::ParallelContext& x, const at::TensorOptions& o) {
    auto rotary = make_rotary(c);
    auto layer = [&](int64_t i) -> std::shared_ptr<DecoderLayer> {
      AttentionSpec a;
      a.type_name = "GPTNeoXAttention";
      a.qkv = AttentionSpec::Qkv::kFusedPerHead;
      a.fused_name = "query_key_value";
      a.out_name = "dense";
      a.qkv_bias = a.out_bias = c.attention_bias;
      a.options = attention_options(c, i);
      a.rotary = rotary;
      return std::make_shared<GPTNeoXLayer>(c, x, o, std::make_shared<RotaryAttention>(c, x, o, a));
    };
    StackSpec s;
    s.type_name = "GPTNeoXModel";
    s.embed_name = "embed_in";
    s.norm_name = "final_layer_norm";
    return std::make_shared<DecoderStack>(c, x, o, s, layer, std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps, o));
  };
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts,
                                              CausalLMSpec{"GPTNeoXForCausalLM", "gpt_neox", "embed_out"}, stack);
}

}  // namespace nnsight
