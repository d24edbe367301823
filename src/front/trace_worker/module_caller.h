// ModuleCaller: runs one of the model's modules on a graph's tensor (a `call`
// node), for the mediators of one worker. The interleaver implements it: it
// owns the path -> module map and knows how values are split across
// tensor-parallel ranks.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace nnsight::tracing {

class ModuleCaller {
 public:
  virtual ~ModuleCaller() = default;
  // The module's forward on x (whole on every rank), with no hooks; the
  // result whole on every rank. Throws nnsight::Error for a module that
  // cannot be called.
  virtual at::Tensor call_module(const std::string& path, const at::Tensor& x) const = 0;
};

}  // namespace nnsight::tracing
