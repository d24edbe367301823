// Linear layer on packed weights with 8-bit activations (llama.cpp's scheme):
// y = x w^T (+ bias) where each block of each row of x (32 elements; 256 for
// the K-quants) is first rounded to int8 with a float scale, and each block's product with the
// weights is an integer dot product (AVX-512 VNNI `vpdpbusd`, or AVX2
// `vpmaddubsw` + `vpmaddwd` on CPUs without it: packed_linear_q8_avx2.cpp).
//
// NOT exact: the activations are rounded (to about 1/254 of each block's
// largest element), so results differ from packed_linear's (which are bitwise
// the float32 model's), as llama.cpp's own path does. Meant for rows no trace
// reads: the engine takes it for them under EngineArgs::fast_untraced
// (core/kernels/int8_rows.h, docs/weights.md); a traced row always takes
// packed_linear.
//
// Each row of x is rounded and multiplied by itself: a row's result does not
// depend on the other rows, their number, or the thread count (the same
// operations per output element whatever the tile), so it is batch invariant
// among such rows too.
//
// The rounding, per block b of a row (llama.cpp's quantize_row_q8_1):
//   amax = max |x_k|, d = amax / 127, q_k = nearbyint(x_k * (127 / amax))
//   (all q_k = 0 where 127 / amax is not finite: amax 0 or below about
//   3.7e-37), s = d * sum q_k.
// Per block with a Q4_1 weight block (scale dw, min mw, nibbles n_k):
//   dw * d * sum n_k q_k + mw * s,
// with a Q4_0 block (scale dw, nibbles n_k, weights dw (n_k - 8)):
//   dw * d * sum n_k q_k + (-8 dw) * s,
// with a Q8_0 block (scale dw, int8 w_k): dw * d * sum w_k q_k; the integer
// sums exact, the terms summed in float32 in a fixed order. Q4_1 and Q8_0
// are the default model's types (its layers and its tied LM head).
//
// The K-quants (Q4_K, Q5_K, Q6_K: llama.cpp's Q4_K_M and Q5_K_M files) are
// rounded the same way per super-block of 256 (llama.cpp's Q8_K, one d per
// 256), with the sums of q over each 16 elements kept. Per super-block with
// a Q4_K weight (d, dmin, 6-bit scale_s and min_s per 32, nibbles n_k; Q5_K:
// 5-bit values n_k):
//   d_x * (d * sum_s scale_s sum_k n_k q_k - dmin * sum_s min_s (q sum of s)),
// with a Q6_K weight (d, int8 scale_g per 16, 6-bit u_k = w_k + 32):
//   d_x * d * (sum_g scale_g sum_k u_k q_k - 32 sum_g scale_g (q sum of g)),
// each sum over the super-block exact in eight int32 lanes, converted and
// scaled once. Q5_0 and Q5_1 stay on packed_linear.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "core/kernels/packed_matrix.h"

namespace nnsight::kernels {

// Whether packed_linear_q8 runs weights of `type` on this CPU: Q4_0, Q4_1,
// Q8_0, Q4_K, Q5_K and Q6_K with AVX-512 F/BW/VL + VNNI, or else with AVX2 +
// FMA (so under NNSIGHT_CPU=avx2 the AVX2 tiles; none under
// NNSIGHT_CPU=scalar). Q4_0 and the K-quants take the AVX2 tiles on either.
// Otherwise callers use packed_linear. The two instruction sets round x the
// same way (the float steps in the thread's rounding mode, the default one
// in practice; the conversion to integers to nearest even in any mode; a
// block whose 127 / amax is not finite to zeros) and compute the same exact
// integer sums; their float sums differ in order (each is batch invariant on
// its own). A NaN in x gives finite garbage, not NaN, and not the same on
// both (as in llama.cpp): the 8-bit rows do not propagate NaN. (AVX-VNNI without AVX-512,
// and AMX tiles, are not written: no such CPU here to test them on.)
bool packed_q8_available(PackedType type);

// x: [..., K] float32 or bfloat16 (widened to float32, the result rounded
// once), contiguous or not; w: [N, K]; bias: [N] (any floating dtype) or
// undefined -> [..., N] in x's dtype. Throws c10::Error where
// packed_q8_available(w.type) is false.
at::Tensor packed_linear_q8(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias);

// Several matrices on one x (a layer's q/k/v or gate/up): the same tensors
// as one packed_linear_q8 call each, bit for bit, with x rounded once and one
// fork-join for all of them. biases: empty, or one (possibly undefined)
// tensor per matrix.
std::vector<at::Tensor> packed_linear_q8_many(const at::Tensor& x, const std::vector<const PackedMatrix*>& ws,
                                              const std::vector<at::Tensor>& biases);

}  // namespace nnsight::kernels
