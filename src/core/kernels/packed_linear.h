// Linear layer and embedding lookup on packed (block-quantized) weights:
// y = x w^T (+ bias) with w a PackedMatrix, never decoded as a whole.
//
// The result equals kernels::linear(x, w.dequantize(), bias) bit for bit, on
// every CPU: the kernel decodes the weights (in registers, or a block of rows
// at a time into an L2-sized float buffer for many rows of x) with the same
// float operations as the reference decoder and then reduces each output
// element exactly as kernels::linear does (fixed order along K, never split).
// So it inherits kernels::linear's batch invariance: a row's result does not
// depend on the other rows, their number, or the thread count.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "core/kernels/linear.h"
#include "core/kernels/packed_matrix.h"

namespace nnsight::kernels {

// x: [..., K] float32 or bfloat16 CPU (bfloat16 is widened to float32, the
// product computed in float32 and rounded once to bfloat16); w: [N, K];
// bias: [N] (any floating dtype) or undefined -> [..., N] in x's dtype.
at::Tensor packed_linear(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias);

// Several matrices with the same input width applied to one x (a layer's
// q/k/v or gate/up projections): the same tensors as one packed_linear call
// each, bit for bit, but at few rows of x (up to packed_fused_max_rows) all
// the matrices' output columns are shared out to the threads as one job, so a
// decode step pays one fork-join for them instead of one per matrix. biases:
// empty, or one (possibly undefined) tensor per matrix.
std::vector<at::Tensor> packed_linear_many(const at::Tensor& x, const std::vector<const PackedMatrix*>& ws,
                                           const std::vector<at::Tensor>& biases);

// The kernel's two ways through, for tests and benchmarks.
enum class PackedPath {
  Auto,   // what packed_linear does: Fused for few rows (AVX2 or AVX-512), else Tiles
  Fused,  // weights decoded in registers inside the register tiles (AVX2 or AVX-512)
  Tiles,  // a block of rows decoded to a float buffer, then kernels::linear's float32 tiles
};
// Whether `path` can run here (Fused needs AVX2 + FMA or AVX-512 F/BW/VL).
bool packed_path_available(PackedPath path);
at::Tensor packed_linear_on_path(PackedPath path, const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias);
// The same with the kernels of one instruction set (kernels::linear's paths):
// its result is bitwise linear_on_path(isa, x, w.dequantize(), bias). What
// packed_linear runs is the isa linear_default_path(kFloat) names.
bool packed_path_available(PackedPath path, LinearPath isa);
at::Tensor packed_linear_on_path(PackedPath path, LinearPath isa, const at::Tensor& x, const PackedMatrix& w,
                                 const at::Tensor& bias);
// Rows of x up to which Auto takes Fused for `type` (0 without AVX2).
int64_t packed_fused_max_rows(PackedType type);

// Rows of w for token ids: ids [T] int64 (each in [0, w.rows)) -> [T, w.cols]
// in dtype (float32 or bfloat16, rounded from the float32 value), equal to
// w.dequantize().index_select(0, ids).to(dtype).
at::Tensor packed_embedding(const PackedMatrix& w, const at::Tensor& ids, at::ScalarType dtype);

}  // namespace nnsight::kernels
