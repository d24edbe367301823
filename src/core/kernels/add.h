// a + b for the residual stream: two float32 CPU contiguous tensors of one
// shape added in one loop into a fresh tensor (the same bits as at::add: one
// IEEE addition per element), without TensorIterator's per-call setup (about
// 0.6 of at::add's 1 us at one token, twice per layer and step). Anything
// else, or a forward recording gradients, goes to at::add.
#pragma once

#include <ATen/ATen.h>

namespace nnsight::kernels {

at::Tensor add(const at::Tensor& a, const at::Tensor& b);

}  // namespace nnsight::kernels
