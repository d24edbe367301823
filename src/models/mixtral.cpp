// Mixtral (Hugging Face MixtralForCausalLM): Llama's layer with a sparse
// mixture of experts in place of the MLP. block_sparse_moe.gate gives the
// router logits [T, experts] (hookable); each token goes to its top-k
// experts, weighted by the softmax of its router logits renormalized over
// those k; experts block_sparse_moe.experts.E.{w1,w2,w3,act_fn}
// (models/sparse_moe.h: token-aligned expert outputs, TP split).
#include <ATen/ATen.h>

#include "models/architectures.h"
#include "models/decoder.h"
#include "models/sparse_moe.h"

namespace nnsight {

std::shared_ptr<CausalLM> make_mixtral(const ModelConfig& cfg, const tp::ParallelContext& ctx,
                                       const at::TensorOptions& opts) {
  auto stack = [](const ModelConfig& c, const tp::ParallelContext& x, const at::TensorOptions& o) {
    auto rotary = make_rotary(c);
    auto layer = [&](int64_t i) -> std::shared_ptr<DecoderLayer> {
      AttentionSpec a;
      a.type_name = "MixtralAttention";
      a.options = attention_options(c, i);
      a.rotary = rotary;
      return std::make_shared<PreNormDecoderLayer>(
          "MixtralDecoderLayer", std::make_shared<RMSNorm>("MixtralRMSNorm", c.hidden_size, c.norm_eps, o),
          std::make_shared<RotaryAttention>(c, x, o, a),
          std::make_shared<RMSNorm>("MixtralRMSNorm", c.hidden_size, c.norm_eps, o), "block_sparse_moe",
          std::make_shared<SparseMoeBlock>(c, x, o, MoeSpec{"MixtralSparseMoeBlock", "MixtralBlockSparseTop2MLP"}));
    };
    StackSpec s;
    s.type_name = "MixtralModel";
    return std::make_shared<DecoderStack>(c, x, o, s, layer,
                                          std::make_shared<RMSNorm>("MixtralRMSNorm", c.hidden_size, c.norm_eps, o));
  };
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts, CausalLMSpec{"MixtralForCausalLM"}, stack);
}

}  // namespace nnsight
