// TensorSharding: how one of a module's values (its input or its output) is
// held across tensor-parallel ranks, and how to turn this rank's part into
// the whole tensor and back. The module base only carries it; the rules live
// in tp/sharding.h (which owns the process group), and the tracing layer
// applies them so interventions read and write whole tensors at any TP size.
//
// A module without a sharding has the same whole value on every rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace nnsight {

class TensorSharding {
 public:
  virtual ~TensorSharding() = default;
  // This rank's part -> the whole tensor, identical on every rank. A
  // collective: every rank must call it, in the same order.
  virtual at::Tensor gather(const at::Tensor& local) const = 0;
  // The whole tensor (possibly edited) -> this rank's part, such that
  // gather(reshard(w)) == w. Local only: no communication.
  virtual at::Tensor reshard(const at::Tensor& whole) const = 0;
  // For messages and docs: "split on the last dim (4 ranks)", "partial sum".
  virtual std::string describe() const = 0;
};

}  // namespace nnsight
