// Internal interface between packed_linear_q8.cpp (the driver: rounding x,
// the threads' split, the column loop) and its instruction-set files: how an
// instruction set lays out a rounded row of x and the tiles that multiply it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "core/kernels/packed_matrix.h"

namespace nnsight::kernels::detail {

// res[i * kQ8Cols + r] = rounded row xq[i] . packed row w[r] over nb blocks
// of 32. Every output element takes the same operations in the same order
// whatever the tile's row count and its position in the tile (batch
// invariance). `prefetch`: bytes ahead of each w row to ask for.
using Q8Tile = void (*)(const uint8_t* const* xq, const uint8_t* const* w, int64_t nb, int64_t prefetch, float* res);

constexpr int kQ8Cols = 4;     // rows of w per tile
constexpr int kQ8MaxRows = 4;  // most rows of x per tile, any instruction set

struct Q8Kernels {
  const char* name;  // "AVX-512 VNNI", "AVX2"
  // Bytes of one rounded row of K elements (a multiple of 64).
  int64_t (*row_bytes)(int64_t K);
  // Which rounding of x a type's tiles read (0 or 1): rows are rounded once
  // per rounding that the matrices of a call need.
  int (*rounding_of)(PackedType type);
  // One row of x ([K] float32, K a multiple of 32) rounded into out
  // (row_bytes(K), 64-byte aligned) for `rounding`.
  void (*round_row)(const float* x, int64_t K, int rounding, uint8_t* out);
  int max_rows;                 // rows of x per tile (<= kQ8MaxRows)
  Q8Tile q4_1[kQ8MaxRows + 1];  // by rows of x; [0] unused
  Q8Tile q8_0[kQ8MaxRows + 1];
};

// nullptr where the instruction set is not compiled for this architecture
// (the CPU check is the caller's).
const Q8Kernels* avx512_q8_kernels();
const Q8Kernels* avx2_q8_kernels();

// The instruction sets' kernels this CPU runs (within NNSIGHT_CPU's cap),
// widest first; packed_linear_q8 takes the first.
std::vector<const Q8Kernels*> q8_kernels_here();

// packed_linear_q8 on the given instruction set's kernels (one of
// q8_kernels_here()): for testing each on a CPU that has several.
at::Tensor packed_linear_q8_on(const Q8Kernels& k, const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias);

}  // namespace nnsight::kernels::detail
