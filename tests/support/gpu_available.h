// Why a GPU test cannot run here ("" when it can): the GPU suites skip with
// this reason on machines without a CUDA LibTorch, the CUDA kernels or a GPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace nnsight::testing {

// A CUDA LibTorch and a visible GPU.
std::string why_no_gpu();
// The same, and a build with the hand-written CUDA kernels (core/kernels/cuda_kernels.h).
std::string why_no_cuda_kernels();

// ||a - b|| / ||b|| in float64, on the host.
double relative_error(const at::Tensor& a, const at::Tensor& b);

}  // namespace nnsight::testing
