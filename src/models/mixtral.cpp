// Mixtral (Hugging Face MixtralForCausalLM): Llama's layer with a sparse
// mixture of experts in place of the MLP. block_sparse_moe.gate gives the
// router logits [T, experts] (hookable); each token goes to its top-k
// experts, weighted by the softmax of its router logits renormalized over
// those k. Each expert (block_sparse_moe.experts.E.{w1,w2,w3,act_fn}) runs
// once per step on the rows routed to it. Unlike Hugging Face (whose expert
// sees [tokens routed to it, hidden]), an expert module's input and output
// are token-aligned [T, hidden] (its output is zero on rows not routed to
// it, and before the routing weight), because the flat batch's contract is
// one row per token: a request's rows of an expert's output are what a
// trace reads and writes. Under tensor parallelism every rank holds every expert, split like a
// dense MLP (w1/w3 by intermediate rows, w2 by columns); the router is
// replicated.
#include <ATen/ATen.h>

#include "models/architectures.h"
#include "models/decoder.h"
#include "tp/sharding.h"

namespace nnsight {

namespace {

class MixtralBlockSparseTop2MLP : public Module {
 public:
  MixtralBlockSparseTop2MLP(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
      : Module("MixtralBlockSparseTop2MLP") {
    const tp::ShardLayout cols =
        tp::ShardLayout::even(cfg.intermediate_size, ctx.world_size(), "intermediate (MLP) size");
    w1 = register_module("w1", std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, false, ctx, cols, false, opts));
    w2 = register_module("w2", std::make_shared<tp::RowParallelLinear>(cfg.hidden_size, false, ctx, cols, opts));
    w3 = register_module("w3", std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, false, ctx, cols, false, opts));
    act_fn = register_module("act_fn", std::make_shared<Activation>(Activation::parse(cfg.hidden_act)));
    act_fn->set_input_sharding(tp::last_dim_sharding(ctx, cols));
    act_fn->set_output_sharding(tp::last_dim_sharding(ctx, cols));
  }
  // x: [T, hidden] (the whole batch), tokens: [n] int64, the rows routed to
  // this expert -> [T, hidden]: the expert's output on those rows, zero on
  // every other row. Computed only on the routed rows; the module's own
  // input and output stay token-aligned, so hooks and traces see one row per
  // token of the batch (w1/w2/w3/act_fn inside see the routed rows only).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& tokens) {
    return invoke(x, [&](const at::Tensor& h) {
      if (tokens.numel() == 0) return at::zeros_like(h);
      at::Tensor rows = h.index_select(0, tokens);                          // [n, hidden]
      at::Tensor y = w2->forward(act_fn->forward(w1->forward(rows)) * w3->forward(rows));
      return at::zeros_like(h).index_copy_(0, tokens, y);                   // [T, hidden]
    });
  }
  std::shared_ptr<tp::ColumnParallelLinear> w1, w3;
  std::shared_ptr<tp::RowParallelLinear> w2;
  std::shared_ptr<Activation> act_fn;
};

class MixtralSparseMoeBlock : public FeedForward {
 public:
  MixtralSparseMoeBlock(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts)
      : FeedForward("MixtralSparseMoeBlock"), top_k_(cfg.num_experts_per_token) {
    set_output_tuple_size(2);  // Hugging Face returns (hidden_states, router_logits)
    // The router is small: every rank holds all of it.
    const int64_t e = cfg.num_experts;
    const tp::ShardLayout all = tp::ShardLayout::from(e, ctx.world_size(), [e](int) {
      return std::vector<tp::RowRange>{{0, e}};
    });
    gate = register_module("gate", std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, false, ctx, all, false, opts));
    gate->set_output_sharding(nullptr);  // whole on every rank
    experts = register_module("experts", torch::nn::ModuleList());
    for (int64_t i = 0; i < e; ++i) {
      auto ex = std::make_shared<MixtralBlockSparseTop2MLP>(cfg, ctx, opts);
      experts->push_back(ex);
      expert_ptrs.push_back(ex);
    }
  }
  at::Tensor forward(const at::Tensor& x) override {
    return invoke(x, [&](const at::Tensor& h) {
      const int64_t e = static_cast<int64_t>(expert_ptrs.size());
      at::Tensor logits = gate->forward(h);                       // [T, experts]
      at::Tensor probs = at::softmax(logits.to(at::kFloat), -1);  // [T, experts]
      auto [weights, chosen] = probs.topk(top_k_, -1);            // [T, k] each
      weights = (weights / weights.sum(-1, true)).to(h.dtype());
      at::Tensor out = at::zeros_like(h);                         // [T, hidden]
      // Slot-major order within each expert, as Hugging Face's where(one_hot) gives.
      at::Tensor chosen_kt = chosen.t().contiguous();             // [k, T]
      for (int64_t ex = 0; ex < e; ++ex) {
        // Every expert runs every step (as in Hugging Face), so its hooks fire even with no rows.
        at::Tensor hit = (chosen_kt == ex).nonzero();             // [n, 2]: (slot, token)
        at::Tensor slot = hit.select(1, 0), token = hit.select(1, 1);
        at::Tensor y = expert_ptrs[ex]->forward(h, token).index_select(0, token);  // [n, hidden]
        at::Tensor w = weights.index({token, slot}).unsqueeze(1);                  // [n, 1]
        out.index_add_(0, token, y * w);
      }
      return out;
    });
  }

  std::shared_ptr<tp::ColumnParallelLinear> gate;
  torch::nn::ModuleList experts;
  std::vector<std::shared_ptr<MixtralBlockSparseTop2MLP>> expert_ptrs;

 private:
  int64_t top_k_;
};

}  // namespace

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
          std::make_shared<MixtralSparseMoeBlock>(c, x, o));
    };
    StackSpec s;
    s.type_name = "MixtralModel";
    return std::make_shared<DecoderStack>(c, x, o, s, layer,
                                          std::make_shared<RMSNorm>("MixtralRMSNorm", c.hidden_size, c.norm_eps, o));
  };
  return std::make_shared<DecoderForCausalLM>(cfg, ctx, opts, CausalLMSpec{"MixtralForCausalLM"}, stack);
}

}  // namespace nnsight
