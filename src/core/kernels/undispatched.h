// Tensor operations a decode step makes hundreds of times, without the cost
// of LibTorch's dispatcher where the result is the same without it.
//
// At batch 1 a step of the default model allocates about 300 kernel outputs
// and reshapes about 120 projection outputs; through the dispatcher
// at::empty / at::empty_like took 0.40-0.47 us and reshape 0.72 us, the
// allocation they end in (at::detail::empty_cpu) 0.22 us and a view 0.10.
#pragma once

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>

namespace nnsight::kernels {

// A new contiguous tensor of `sizes` (at::empty(sizes, options)): on the CPU
// the allocation at::empty's CPU kernel makes, called directly.
inline at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (options.device().is_cpu() && options.layout() == at::kStrided) return at::detail::empty_cpu(sizes, options);
  return at::empty(sizes, options);
}

// new_output with t's sizes, dtype and device (at::empty_like(t) for a contiguous t).
inline at::Tensor new_output_like(const at::Tensor& t) { return new_output(t.sizes(), t.options()); }

// x.reshape(sizes): a view of a contiguous x (what reshape returns for it).
inline at::Tensor reshaped(const at::Tensor& x, at::IntArrayRef sizes) {
  return x.is_contiguous() ? x.view(sizes) : x.reshape(sizes);
}

}  // namespace nnsight::kernels
