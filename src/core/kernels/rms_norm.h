// RMSNorm, fused on the CPU: y = w * (x / sqrt(mean(x^2) + eps)), accumulated
// in float32 as Hugging Face does, cast back before the weight multiply.
#pragma once

#include <ATen/core/Tensor.h>

namespace nnsight::kernels {

// x: [rows, hidden], weight: [hidden] -> [rows, hidden]
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace nnsight::kernels
