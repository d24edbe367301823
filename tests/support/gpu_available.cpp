#include "support/gpu_available.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/kernels/cuda_kernels.h"
#include "tp/nccl_process_group.h"

namespace nnsight::testing {

std::string why_no_gpu() {
  if (!at::hasCUDA()) return "this LibTorch has no CUDA (see scripts/gpu-build)";
  if (tp::cuda_device_count() < 1) return "no CUDA GPU is visible";
  return "";
}

std::string why_no_cuda_kernels() {
  if (!kernels::cuda_kernels_built())
    return "this build has no CUDA kernels (a CPU LibTorch or no nvcc at configure time; see scripts/gpu-build)";
  return why_no_gpu();
}

double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ad = a.to(at::kCPU).to(at::kDouble), bd = b.to(at::kCPU).to(at::kDouble);
  return (ad - bd).norm().item<double>() / std::max(bd.norm().item<double>(), 1e-30);
}

}  // namespace nnsight::testing
