// Zero-filled parameter tensors that cost no memory until written.
//
// Layers allocate their parameters at construction and fill them when the
// weights load; a layer whose weight stays packed (kernels::PackedMatrix)
// never writes its float tensor. at::zeros would touch every page (an 8B
// model's float32 weights are 32 GB); these come from an anonymous mapping
// whose pages the kernel supplies, zeroed, on first write.
#pragma once

#include <ATen/core/Tensor.h>

#include <c10/core/TensorOptions.h>

namespace nnsight {

// Like at::zeros(sizes, options). CPU tensors of 1 MiB or more are backed by
// their own anonymous mapping (released with the tensor); others are at::zeros.
at::Tensor lazy_zeros(at::IntArrayRef sizes, const at::TensorOptions& options);

// A [sizes] tensor in options' dtype whose every element is NaN and which owns
// one element of memory (all strides 0): what a layer's float parameter
// becomes once its weight is served packed, so a stray read is loud (NaN)
// and a write is an error, without holding the float weights.
at::Tensor nan_placeholder(at::IntArrayRef sizes, const at::TensorOptions& options);

// Whether t is such a placeholder.
bool is_nan_placeholder(const at::Tensor& t);

}  // namespace nnsight
