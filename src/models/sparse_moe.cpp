#include "models/sparse_moe.h"

#include <ATen/ATen.h>

#include "core/kernels/int8_rows.h"

#include "tp/sharding.h"

namespace nnsight {

MoeExpert::MoeExpert(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                     const MoeSpec& spec)
    : Module(spec.expert_type) {
  const int64_t inter = spec.expert_intermediate > 0 ? spec.expert_intermediate : cfg.intermediate_size;
  const tp::ShardLayout cols = tp::ShardLayout::even(inter, ctx.world_size(), "expert intermediate (MLP) size");
  const int64_t hidden = cfg.hidden_size;
  gate_proj = register_module(spec.gate_name,
                              std::make_shared<tp::ColumnParallelLinear>(hidden, false, ctx, cols, false, opts));
  up_proj =
      register_module(spec.up_name, std::make_shared<tp::ColumnParallelLinear>(hidden, false, ctx, cols, false, opts));
  down_proj = register_module(spec.down_name, std::make_shared<tp::RowParallelLinear>(hidden, false, ctx, cols, opts));
  act_fn = register_module("act_fn", std::make_shared<Activation>(Activation::parse(cfg.hidden_act)));
  act_fn->set_input_sharding(tp::last_dim_sharding(ctx, cols));
  act_fn->set_output_sharding(tp::last_dim_sharding(ctx, cols));
  for (Module* m :
       {static_cast<Module*>(this), static_cast<Module*>(gate_proj.get()), static_cast<Module*>(up_proj.get()),
        static_cast<Module*>(down_proj.get()), static_cast<Module*>(act_fn.get())})
    m->set_row_tokens(row_tokens_);
}

at::Tensor MoeExpert::forward(const at::Tensor& rows, const at::Tensor& tokens) {
  *row_tokens_ = tokens;                            // read by traces while this forward runs
  return invoke(rows, [&](const at::Tensor& h) {    // [n, hidden]
    const at::Tensor gate = gate_proj->forward(h);  // before up_proj: hooks fire in Hugging Face's order
    return down_proj->forward(act_fn->forward_gated(gate, up_proj->forward(h)));
  });
}

SparseMoeBlock::SparseMoeBlock(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts,
                               MoeSpec spec)
    : FeedForward(spec.block_type), spec_(std::move(spec)), top_k_(cfg.num_experts_per_token) {
  set_output_tuple_size(2);  // Hugging Face returns (hidden_states, router_logits)
  // The router is small: every rank holds all of it, and its output is whole.
  const int64_t e = cfg.num_experts;
  const tp::ShardLayout all = tp::ShardLayout::from(e, ctx.world_size(), [e](int) {
    return std::vector<tp::RowRange>{{0, e}};
  });
  gate = register_module("gate",
                         std::make_shared<tp::ColumnParallelLinear>(cfg.hidden_size, false, ctx, all, false, opts));
  gate->set_output_sharding(nullptr);
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t i = 0; i < e; ++i) {
    auto ex = std::make_shared<MoeExpert>(cfg, ctx, opts, spec_);
    experts->push_back(ex);
    expert_ptrs.push_back(ex);
  }
}

at::Tensor SparseMoeBlock::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& h) {
    const int64_t e = static_cast<int64_t>(expert_ptrs.size());
    at::Tensor logits = gate->forward(h);                       // [T, experts]
    at::Tensor probs = at::softmax(logits.to(at::kFloat), -1);  // [T, experts]
    auto [weights, chosen] = probs.topk(top_k_, -1);            // [T, k] each
    if (spec_.renormalize) weights = weights / weights.sum(-1, true);
    weights = weights.to(h.dtype());
    at::Tensor out = at::zeros_like(h);  // [T, hidden]
    // Slot-major order within each expert, as Hugging Face's where(one_hot) gives.
    at::Tensor chosen_kt = chosen.t().contiguous();  // [k, T]
    // An expert sees the tokens routed to it, not the step's rows: they stay
    // exact (no 8-bit activation rows; core/kernels/int8_rows.h).
    const kernels::Int8RowsScope exact_experts(nullptr);
    for (int64_t ex = 0; ex < e; ++ex) {
      // Every expert runs every step (as in Hugging Face), so its hooks fire even with no rows.
      at::Tensor hit = (chosen_kt == ex).nonzero();  // [n, 2]: (slot, token)
      at::Tensor slot = hit.select(1, 0), token = hit.select(1, 1);
      at::Tensor y = expert_ptrs[ex]->forward(h.index_select(0, token), token);  // [n, hidden]
      at::Tensor w = weights.index({token, slot}).unsqueeze(1);                  // [n, 1]
      out.index_add_(0, token, y * w);
    }
    return out;
  });
}

}  // namespace nnsight
