// Internal interface between packed_linear.cpp and its instruction-set files.
#pragma once

#include <cstdint>

#include "core/kernels/linear.h"
#include "core/kernels/linear_tiles.h"
#include "core/kernels/packed_matrix.h"

namespace nnsight::kernels::detail {

struct PackedKernels {
  // Decodes `n` elements (whole blocks) of one row to float32, bitwise as
  // decode_packed_reference does.
  void (*decode_row)(const uint8_t* src, float* dst, int64_t n) = nullptr;
  // Fused tiles by number of x rows (TileArgs::w holds packed row pointers,
  // TileArgs::x float32 rows); their sums equal the float32 tiles of the
  // same path on the decoded rows, bit for bit.
  int max_mr = 0;
  TileKernel by_mr[TileSet::kMaxRows + 1] = {};
};

// nullptr where the path is not compiled for this architecture (the CPU
// check is the caller's).
const PackedKernels* avx512_packed_kernels(PackedType type);

// kernels::linear's unit of w rows: threads' ranges and blocks of w are
// multiples of it, so that a block splits evenly into the float32 tiles' 3 or
// 4 streams (the packed Tiles path uses it too: with blocks of multiples of 8
// rows, the last tile of each stream computed up to 2 rows that were never
// stored, 5 % of down_proj's work).
constexpr int64_t kLinearRowsPerUnit = 24;

// Rows of a block of w ([rows, K] of elem_bytes each) that kernels::linear
// keeps in L2 while every row tile of x passes over it (linear.cpp): about
// 256 KiB, a multiple of kLinearRowsPerUnit.
int64_t linear_block_rows(int64_t K, int64_t elem_bytes);

// kernels::linear's float32 column loop (linear.cpp) over a block of decoded
// rows: out[:, n] for n in [n_begin, n_end), row n of w at
// w_block + (n - n_begin) * K.
void linear_columns_f32(const TileSet& tiles, const float* x, const float* w_block, const float* bias, float* out,
                        int64_t M, int64_t N, int64_t K, int64_t n_begin, int64_t n_end);

// The float32 / bfloat16 tiles of kernels::linear's path (nullptr where this
// build or CPU lacks it).
const TileSet* linear_tiles(LinearPath path, at::ScalarType dtype);

}  // namespace nnsight::kernels::detail
