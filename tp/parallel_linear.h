// Linear layers split across tensor-parallel ranks, Megatron style.
//
// ColumnParallelLinear holds some rows of the whole [out, in] weight (output
// features); its output is this rank's slice of the last dimension unless it
// gathers. RowParallelLinear holds some columns (input features); it takes
// its input already split on the last dimension and all-reduces its partial
// output, so its output is whole on every rank. At world size 1 both are a
// plain y = x W^T + b.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "core/module.h"
#include "tp/process_group.h"

namespace nnsight::tp {

// Rows [start, start + length) of a whole weight.
struct RowRange {
  int64_t start = 0;
  int64_t length = 0;
};

// Splits [0, total) into world_size equal ranges and returns rank's. Throws
// nnsight::ConfigError naming `what` when total does not divide.
RowRange even_split(int64_t total, const ParallelContext& ctx, const std::string& what);

class ColumnParallelLinear : public Module {
 public:
  // `rows` are the ranges of whole-weight rows this rank holds, concatenated
  // in order (several ranges for fused projections such as GPT-2's c_attn).
  ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias, ParallelContext ctx,
                       std::vector<RowRange> rows, bool gather_output,
                       const at::TensorOptions& options);

  at::Tensor forward(const at::Tensor& x);  // [T, in] -> [T, local_out] (or [T, out] gathered)
  void load_weights(const WeightSource& source) override;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }  // whole-weight rows
  const std::vector<RowRange>& rows() const { return rows_; }
  bool gathers_output() const { return gather_output_; }
  at::Tensor weight;  // [local_out, in]
  at::Tensor bias;    // [local_out] or undefined

 private:
  int64_t in_, out_;
  ParallelContext ctx_;
  std::vector<RowRange> rows_;
  bool gather_output_;
};

class RowParallelLinear : public Module {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, bool bias, ParallelContext ctx,
                    RowRange cols, const at::TensorOptions& options);

  at::Tensor forward(const at::Tensor& x);  // [T, local_in] -> [T, out], reduced over ranks
  void load_weights(const WeightSource& source) override;

  int64_t in_features() const { return in_; }  // whole-weight columns
  int64_t out_features() const { return out_; }
  RowRange cols() const { return cols_; }
  at::Tensor weight;  // [out, local_in]
  at::Tensor bias;    // [out] (whole, added once after the reduction) or undefined

 private:
  int64_t in_, out_;
  ParallelContext ctx_;
  RowRange cols_;
};

}  // namespace nnsight::tp
