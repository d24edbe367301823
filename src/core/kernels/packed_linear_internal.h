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
  // by_mr[max_mr]'s sums, also storing the decoded rows (TileArgs::decoded);
  // fn nullptr where the instruction set has none.
  TileKernel decoding;
};

// An instruction set's kernels for `type`: make(TypeTag<Q>{}) builds the set
// of a type's decoder Q, once per type.
template <class Q>
struct TypeTag {
  using type = Q;
};
template <class Q4_0, class Q4_1, class Q5_0, class Q5_1, class Q8_0, class Q4_K, class Q5_K, class Q6_K, class Make>
const PackedKernels* kernels_of(PackedType type, Make make) {
  static const PackedKernels q4_0 = make(TypeTag<Q4_0>{}), q4_1 = make(TypeTag<Q4_1>{}), q5_0 = make(TypeTag<Q5_0>{}),
                             q5_1 = make(TypeTag<Q5_1>{}), q8_0 = make(TypeTag<Q8_0>{}), q4_k = make(TypeTag<Q4_K>{}),
                             q5_k = make(TypeTag<Q5_K>{}), q6_k = make(TypeTag<Q6_K>{});
  switch (type) {
    case PackedType::Q4_0:
      return &q4_0;
    case PackedType::Q4_1:
      return &q4_1;
    case PackedType::Q5_0:
      return &q5_0;
    case PackedType::Q5_1:
      return &q5_1;
    case PackedType::Q8_0:
      return &q8_0;
    case PackedType::Q4_K:
      return &q4_k;
    case PackedType::Q5_K:
      return &q5_k;
    case PackedType::Q6_K:
      return &q6_k;
  }
  return nullptr;
}

// nullptr where the path is not compiled for this architecture (the CPU
// check is the caller's).
const PackedKernels* avx512_packed_kernels(PackedType type);
const PackedKernels* avx2_packed_kernels(PackedType type);

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
