// Batch-invariant CPU linear layer: y = x w^T (+ bias).
//
// Each output element y[m, n] is reduced along K in an order fixed by K and
// the instruction-set path alone -- never by M, by the other rows of x, or by
// the thread count -- so a row's result is bitwise the same whichever rows
// share the batch (an LLM's greedy output does not depend on its neighbours).
// Work is split across threads by output columns only; K is never split.
// Float32 and bfloat16 (accumulated in float32) run the fused kernel; anything
// else goes to at::linear.
#pragma once

#include <ATen/core/Tensor.h>

namespace nnsight::kernels {

// x: [..., K], w: [N, K] (row-major, as at::linear's weight), bias: [N] or
// undefined -> [..., N] in x's dtype. The kernel runs for CPU tensors of one
// dtype (float32 or bfloat16) with a contiguous w and no autograd to record;
// other arguments are passed to at::linear.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);

// The kernel's instruction-set paths. Each one is batch-invariant by itself;
// results of different paths may differ in the last bits.
enum class LinearPath {
  Scalar,  // portable C++, any CPU
  Avx2,    // x86-64 AVX2 + FMA
  Avx512,  // x86-64 AVX-512 (F, BW, VL; bfloat16 also needs AVX512_BF16)
};

const char* linear_path_name(LinearPath path);

// Whether this build and this CPU can run `path` for dtype (kFloat or kBFloat16).
bool linear_path_available(LinearPath path, at::ScalarType dtype);

// The path linear() takes for dtype on this CPU: the widest one available.
LinearPath linear_default_path(at::ScalarType dtype);

// Whether linear() runs the kernel (rather than at::linear) for these arguments.
bool linear_uses_kernel(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);

// linear() on a chosen path, for tests and benchmarks. The arguments must be
// ones the kernel takes (linear_uses_kernel) and the path available.
at::Tensor linear_on_path(LinearPath path, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);

}  // namespace nnsight::kernels
