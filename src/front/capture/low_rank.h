// Rank-k factorization of one step's captured block for one layer.
//
// x [n, hidden] ~= coefficients [n, k] @ basis [k, hidden], computed by a
// thin SVD (x = U S V^T; coefficients = U_k S_k, basis = V_k^T). By
// Eckart-Young this is the best rank-k approximation: the Frobenius error is
// sqrt(sum_{i>k} s_i^2), and nothing of rank k does better. Deterministic
// (no random projection), so every rank and every run agree.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace nnsight::capture {

struct LowRank {
  at::Tensor coefficients;  // [n, k] float32, contiguous
  at::Tensor basis;         // [k, hidden] float32, contiguous
};

// k is clamped to min(n, hidden).
LowRank truncated_svd(const at::Tensor& x, int64_t k);

}  // namespace nnsight::capture
