// Float dot products and weighted row sums over lists of rows (float32 or
// bfloat16 storage), vectorized with runtime CPU dispatch: AVX-512, AVX2 + FMA,
// or portable C++. For each output the order of operations depends only on
// the row length d (and, for weighted sums, on the order of the rows given),
// never on how many rows are passed along with it: what batch-invariant
// kernels such as paged attention need.
#pragma once

#include <cstdint>

namespace nnsight::kernels {

enum class RowType {
  F32,   // float
  BF16,  // bfloat16 (its 16 bits)
};

// out[j] = sum_x q[x] * rows[j][x]   for j < n, x < d.
void dot_rows(const float* q, const void* const* rows, RowType type, int64_t n, int64_t d, float* out);

// acc[x] += w[j] * rows[j][x]   for x < d, adding the rows in order j = 0, 1, ..., n - 1.
void axpy_rows(const float* w, const void* const* rows, RowType type, int64_t n, int64_t d, float* acc);

// A softmax's numerators in place: s[j] = exp(s[j] - max_i s[i]) for j < n
// (n >= 1); returns their sum, and the maximum in *max_out (when given).
float exp_shifted_sum(float* s, int64_t n, float* max_out = nullptr);

}  // namespace nnsight::kernels
