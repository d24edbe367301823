// HeadSplitSharding: a [T, heads, head_dim] value whose heads are split like a
// column-parallel projection's features, gathered and re-sharded through the
// flat [T, heads * head_dim] view (per-head q/k norms, attention points).
#pragma once

#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "core/tensor_sharding.h"

namespace nnsight {

class HeadSplitSharding final : public TensorSharding {
 public:
  HeadSplitSharding(std::shared_ptr<const TensorSharding> flat, int64_t head_dim)
      : flat_(std::move(flat)), head_dim_(head_dim) {}
  at::Tensor gather(const at::Tensor& local) const override {
    return flat_->gather(local.reshape({local.size(0), -1})).view({local.size(0), -1, head_dim_});
  }
  at::Tensor reshard(const at::Tensor& whole) const override {
    return flat_->reshard(whole.reshape({whole.size(0), -1})).view({whole.size(0), -1, head_dim_});
  }
  std::string describe() const override { return flat_->describe() + " (heads of " + std::to_string(head_dim_) + ")"; }

 private:
  std::shared_ptr<const TensorSharding> flat_;
  int64_t head_dim_;
};

}  // namespace nnsight
