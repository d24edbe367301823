// Batch-invariant matmuls on a device. cuBLAS chooses its GEMM kernel (tile
// shape, split-K) by the problem's row count, so a row's result can change
// in its last bits with the number of rows beside it -- and a greedy token
// with its request's batch companions. The CPU kernels here are invariant
// by construction (linear.cpp); on a device, with fixed rows set
// (NNSIGHT_FIXED_ROWS=T, off by default), a linear runs its rows in chunks
// of exactly T rows, the last one zero-padded: every GEMM has the same shape
// whatever the step, so a row's result depends on its own values only. A
// decode step of at most T rows reads the weights once, as the unpadded GEMM
// does (a GEMM of T <= 128 rows is bound by the weights' reads on an H100);
// a prefill of R rows runs ceil(R / T) GEMMs.
//
// Whether cuBLAS needs it, and what it costs, is measured on a GPU
// (CudaGraphs.ARequestsTokensDoNotDependOnItsCompanions prints both ways;
// gpu_bench prints the decode rows with it).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace nnsight::kernels {

// The chunk's rows (0: off). NNSIGHT_FIXED_ROWS, read on first use; a value
// that is not a whole number from 1 to 4096 is a ConfigError.
int64_t fixed_rows();
// Forgets any set value and reads NNSIGHT_FIXED_ROWS again (tests).
int64_t fixed_rows_reread_environment();

// x [..., K] times w [N, K]^T (+ bias [N]) in chunks of `rows` rows:
// [..., N], each row's value the same whatever the other rows are.
at::Tensor fixed_rows_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, int64_t rows);

// Sets fixed_rows() for its lifetime, process-wide (tests and benches);
// then brings back what it found (the environment unread, if it was).
class UseFixedRows {
 public:
  explicit UseFixedRows(int64_t rows);
  ~UseFixedRows();
  UseFixedRows(const UseFixedRows&) = delete;
  UseFixedRows& operator=(const UseFixedRows&) = delete;

 private:
  int64_t before_;
};

}  // namespace nnsight::kernels
