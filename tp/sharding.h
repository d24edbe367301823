// The gather / re-shard rules that let interventions see whole tensors under
// tensor parallelism (docs/tensor_parallel.md):
//
//   LastDimSharding    a column-parallel output, or a row-parallel input:
//                      each rank holds some positions of the last dimension
//                      (ShardLayout). gather = all-gather + reassembly in
//                      the unsharded order (replicated positions taken once);
//                      reshard = this rank's positions of the whole.
//   PartialSumSharding a value that is still a partial sum over ranks (the
//                      whole is the sum of every rank's part). gather =
//                      all-reduce; reshard = whole / world size.
#pragma once

#include <memory>
#include <string>

#include "core/tensor_sharding.h"
#include "tp/process_group.h"
#include "tp/shard_layout.h"

namespace nnsight::tp {

class LastDimSharding final : public TensorSharding {
 public:
  LastDimSharding(ParallelContext ctx, ShardLayout layout);
  at::Tensor gather(const at::Tensor& local) const override;   // [..., local] -> [..., whole]
  at::Tensor reshard(const at::Tensor& whole) const override;  // [..., whole] -> [..., local]
  std::string describe() const override;
  const ShardLayout& layout() const { return layout_; }

 private:
  ParallelContext ctx_;
  ShardLayout layout_;
};

class PartialSumSharding final : public TensorSharding {
 public:
  explicit PartialSumSharding(ParallelContext ctx);
  at::Tensor gather(const at::Tensor& local) const override;
  at::Tensor reshard(const at::Tensor& whole) const override;
  std::string describe() const override;

 private:
  ParallelContext ctx_;
};

// nullptr at world size 1 (nothing to gather), else a LastDimSharding.
std::shared_ptr<const TensorSharding> last_dim_sharding(const ParallelContext& ctx, const ShardLayout& layout);

}  // namespace nnsight::tp
