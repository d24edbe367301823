// A sparse mixture-of-experts feed-forward block (Mixtral, Qwen3-MoE).
//
// `gate` (a Linear, replicated on every rank) gives the router logits
// [T, experts], hookable as `<block>.gate`; each token goes to its top-k
// experts by softmax probability, weighted by those probabilities
// (renormalized over the k when the spec says so). Each expert is a gated
// MLP computed once per step on the rows routed to it, as in Hugging Face:
// its input and output are [routed, hidden], slot-major (the tokens whose
// first choice it is, in order, then those whose second choice, ...), and
// the routing weight is applied after it. The expert and the modules inside
// it publish each row's token row (Module::row_tokens), so traces see a
// request's own routed rows (batching::RowLevel::kRouted) in the order
// Hugging Face gives that request alone. Under tensor parallelism every
// rank holds every expert, split like a dense MLP.
#pragma once

#include <torch/nn/modules/container/modulelist.h>

#include <memory>
#include <string>
#include <vector>

#include "models/decoder.h"

namespace nnsight {

struct MoeSpec {
  std::string block_type;   // "MixtralSparseMoeBlock"
  std::string expert_type;  // "MixtralBlockSparseTop2MLP"
  // Expert projection names: gate (activated), up, down.
  std::string gate_name = "w1", up_name = "w3", down_name = "w2";
  int64_t expert_intermediate = 0;  // 0 = cfg.intermediate_size
  bool renormalize = true;          // divide the top-k weights by their sum
};

class MoeExpert : public Module {
 public:
  MoeExpert(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts, const MoeSpec& spec);
  // rows: [n, hidden], the hidden states of tokens (int64 [n], their token
  // rows in the step) -> [n, hidden], before the routing weight.
  at::Tensor forward(const at::Tensor& rows, const at::Tensor& tokens);
  // A graph's call: every row of x as if routed here.
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override {
    return forward(x, at::arange(x.size(0), x.options().dtype(at::kLong)));
  }

  std::shared_ptr<tp::ColumnParallelLinear> gate_proj, up_proj;
  std::shared_ptr<tp::RowParallelLinear> down_proj;
  std::shared_ptr<Activation> act_fn;

 private:
  std::shared_ptr<at::Tensor> row_tokens_ = std::make_shared<at::Tensor>();  // shared with the sublayers
};

class SparseMoeBlock : public FeedForward {
 public:
  SparseMoeBlock(const ModelConfig& cfg, const tp::ParallelContext& ctx, const at::TensorOptions& opts, MoeSpec spec);
  // [T, hidden] -> [T, hidden]; hooks see the tuple (hidden, None).
  at::Tensor forward(const at::Tensor& x) override;

  std::shared_ptr<tp::ColumnParallelLinear> gate;
  torch::nn::ModuleList experts;
  std::vector<std::shared_ptr<MoeExpert>> expert_ptrs;

 private:
  MoeSpec spec_;
  int64_t top_k_;
};

}  // namespace nnsight
