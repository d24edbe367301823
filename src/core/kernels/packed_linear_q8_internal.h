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
// of the type. Every output element takes the same operations in the same
// order whatever the tile's row count and its position in the tile (batch
// invariance). `prefetch`: bytes ahead of each w row to ask for.
using Q8Tile = void (*)(const uint8_t* const* xq, const uint8_t* const* w, int64_t nb, int64_t prefetch, float* res);

constexpr int kQ8Cols = 4;     // rows of w per tile
constexpr int kQ8MaxRows = 4;  // most rows of x per tile, any instruction set

// One way of rounding a row of x and laying it out; matrices whose tiles
// read the same rounding share one rounded copy of x in a call.
struct Q8Rounding {
  int64_t (*row_bytes)(int64_t K);                             // bytes of a rounded row (a multiple of 64)
  void (*round_row)(const float* x, int64_t K, uint8_t* out);  // out: row_bytes(K), 64-byte aligned
};

// A weight type's tiles on one instruction set.
struct Q8TypeKernels {
  const Q8Rounding* rounding = nullptr;  // null: the type does not run here
  int max_rows = 0;                      // rows of x per tile (<= kQ8MaxRows)
  Q8Tile by_mr[kQ8MaxRows + 1] = {};     // by rows of x; [0] unused
};

struct Q8Kernels {
  const char* name;  // "AVX-512 VNNI", "AVX2"
  Q8TypeKernels q4_0, q4_1, q8_0, q4_k, q5_k, q6_k;

  const Q8TypeKernels* of(PackedType type) const {
    const Q8TypeKernels* k = type == PackedType::Q4_0   ? &q4_0
                             : type == PackedType::Q4_1 ? &q4_1
                             : type == PackedType::Q8_0 ? &q8_0
                             : type == PackedType::Q4_K ? &q4_k
                             : type == PackedType::Q5_K ? &q5_k
                             : type == PackedType::Q6_K ? &q6_k
                                                        : nullptr;
    return k != nullptr && k->rounding != nullptr ? k : nullptr;
  }
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
