// A sparse mixture-of-experts feed-forward block (Mixtral, Qwen3-MoE).
//
// `gate` (a Linear, replicated on every rank) gives the router logits
// [T, experts], hookable as `<block>.gate`; each token goes to its top-k
// experts by softmax probability, weighted by those probabilities
// (renormalized over the k when the spec says so). Each expert is a gated
// MLP computed once per step on the rows routed to it. Its module input and
// output are token-aligned [T, hidden] (output zero on rows not routed to
// it, before the routing weight), where Hugging Face's expert sees only its
// routed rows: the flat batch's contract is one row per token, so traces
// read and write a request's rows of an expert like any module's. Under
// tensor parallelism every rank holds every expert, split like a dense MLP.
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
  // x: [T, hidden], tokens: [n] int64 (rows routed here) -> [T, hidden], zero off those rows.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& tokens);

  std::shared_ptr<tp::ColumnParallelLinear> gate_proj, up_proj;
  std::shared_ptr<tp::RowParallelLinear> down_proj;
  std::shared_ptr<Activation> act_fn;
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
