// Linear layers split across tensor-parallel ranks, Megatron style.
//
// ColumnParallelLinear holds some rows of the whole [out, in] weight (output
// features); its output is this rank's slice of the last dimension unless it
// gathers. RowParallelLinear holds some columns (input features); it takes
// its input already split on the last dimension and all-reduces its partial
// output inside forward, so its hooks see the whole output on every rank.
// At world size 1 both are a plain y = x W^T + b.
//
// Each sets the sharding of the values its hooks see (Module::*_sharding):
// a column-parallel output that is not gathered and a row-parallel input are
// LastDimSharding with the layer's layout; everything else is whole.
//
// Packed weights: when the source serves the weight packed
// (WeightSource::load_packed: a block-quantized GGUF tensor opened with
// keep_packed), the layer keeps it so and multiplies with
// kernels::packed_linear; `weight` then becomes a NaN placeholder of the
// right shape holding no memory (nnsight::nan_placeholder), and
// dense_weight() decodes the float weight on demand.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/kernels/packed_matrix.h"
#include "core/module.h"
#include "tp/process_group.h"
#include "tp/shard_layout.h"

namespace nnsight::tp {

class ColumnParallelLinear : public Module {
 public:
  // `layout` says which whole-weight rows every rank holds; this rank's
  // ranges are concatenated in order (several for fused projections such as
  // GPT-2's c_attn). layout.whole() is out_features.
  ColumnParallelLinear(int64_t in_features, bool bias, ParallelContext ctx, ShardLayout layout, bool gather_output,
                       const at::TensorOptions& options);

  at::Tensor forward(const at::Tensor& x);  // [T, in] -> [T, local_out] (or [T, out] gathered)
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }
  void load_weights(const WeightSource& source) override;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return layout_.whole(); }  // whole-weight rows
  const std::vector<RowRange>& rows() const { return layout_.ranges(ctx_.rank()); }
  const ShardLayout& layout() const { return layout_; }
  bool gathers_output() const { return gather_output_; }
  // The packed weight ([local_out, in]), or nullptr when `weight` holds it.
  const kernels::PackedMatrix* packed_weight() const { return packed_.get(); }
  // The weight as a float tensor of the layer's dtype: `weight`, or the packed one decoded.
  at::Tensor dense_weight() const;
  at::Tensor weight;  // [local_out, in]
  at::Tensor bias;    // [local_out] or undefined

 private:
  int64_t in_;
  ParallelContext ctx_;
  ShardLayout layout_;
  bool gather_output_;
  std::shared_ptr<const TensorSharding> split_;  // how the local output is split (null at world size 1)
  std::shared_ptr<const kernels::PackedMatrix> packed_;
};

// The forwards of several column-parallel layers on the same x (a layer's
// q/k/v or gate/up projections), equal to calling each one's forward: when
// every layer holds a packed weight, has no hook and does not gather its
// output, one kernels::packed_linear_many call (one fork-join at decode
// instead of one per layer); otherwise each layer's forward in turn.
std::vector<at::Tensor> forward_together(const at::Tensor& x, const std::vector<ColumnParallelLinear*>& layers);

class RowParallelLinear : public Module {
 public:
  // `layout`: the whole-weight columns (input features) every rank holds;
  // layout.whole() is in_features.
  RowParallelLinear(int64_t out_features, bool bias, ParallelContext ctx, ShardLayout layout,
                    const at::TensorOptions& options);

  at::Tensor forward(const at::Tensor& x);  // [T, local_in] -> [T, out], reduced over ranks
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }
  void load_weights(const WeightSource& source) override;

  int64_t in_features() const { return layout_.whole(); }  // whole-weight columns
  int64_t out_features() const { return out_; }
  RowRange cols() const;  // this rank's columns
  const ShardLayout& layout() const { return layout_; }
  const kernels::PackedMatrix* packed_weight() const { return packed_.get(); }
  at::Tensor dense_weight() const;
  at::Tensor weight;  // [out, local_in]
  at::Tensor bias;    // [out] (whole, added once after the reduction) or undefined

 private:
  int64_t out_;
  ParallelContext ctx_;
  ShardLayout layout_;
  std::shared_ptr<const kernels::PackedMatrix> packed_;
};

// Makes `param` (a registered parameter) a NaN placeholder of its own shape
// (nnsight::nan_placeholder), releasing its memory, for a layer whose weight
// is now served packed.
void release_to_placeholder(at::Tensor& param);

}  // namespace nnsight::tp
