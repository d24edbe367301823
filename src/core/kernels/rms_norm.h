// RMSNorm, fused on the CPU: y = w * (x / sqrt(mean(x^2) + eps)), accumulated
// in float32 as Hugging Face does, cast back before the weight multiply.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace nnsight::kernels {

// x: [rows, hidden], weight: [hidden] -> [rows, hidden]
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The residual stream's add and the norm after it in one pass:
// {a + b, rms_norm(a + b, weight, eps)}, the same bits as kernels::add then
// rms_norm (a: [rows, hidden]; b the same shape). One call instead of two per
// decoder layer, and the sum is normed while it is still in L1. Float32 CPU
// tensors of one shape; anything else (or a forward recording gradients) runs
// the two calls.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& weight,
                                               double eps);

}  // namespace nnsight::kernels
