// Register-tile micro-kernels of the CPU linear kernel (kernels::linear), one
// set per instruction-set path. Internal to src/core/kernels/linear*.cpp.
//
// A tile computes, for mr rows of x and nr rows of w, the float dot products
//   sum_k x_rows[i][k] * w_rows[j][k],   k in [0, K)
// and stores them (plus bias) to the output.
// Batch invariance rests on one rule every tile of a path obeys: the
// operations applied to one (i, j) accumulator -- their order along K, the
// lane split, the tail handling and the final horizontal-add tree -- depend
// only on K, never on mr, nr, or which other rows share the tile. So any
// blocking of M and N, and any thread partition, yields bitwise the same sums.
#pragma once

#include <cstdint>
#include <cstring>

namespace nnsight::kernels::detail {

// One call: mr rows of x against nr rows of w, results stored to the output.
struct TileArgs {
  const void* const* x;  // [mr] rows of x (elements of the path's dtype), K long
  const void* const* w;  // [nr] rows of w, K long
  int64_t k = 0;
  // When not 0, the tile asks for the memory this many bytes past each w
  // address it reads (w streamed from memory); it never changes the result.
  int64_t prefetch = 0;
  void* out = nullptr;  // output element (first x row, column 0); rows ldo elements apart
  int64_t ldo = 0;
  const int64_t* col = nullptr;  // [nr] output column of each w row
  int nr_store = 0;              // columns stored: the first nr_store (later ones are repeats)
  const float* bias = nullptr;   // [nr] bias of each column, or nullptr for none
  // Packed tiles that decode (PackedKernels::decoding) also store w row j's
  // decoded float32 weights at decoded[j]; others ignore it.
  float* const* decoded = nullptr;
};

// out[i, col[j]] = round(sum_k x[i][k] * w[j][k] (+ bias[j])), the sum in the
// path's fixed order, the bias added in float, rounded once to the dtype.
using TileFn = void (*)(const TileArgs& args);

struct TileKernel {
  int nr = 0;  // w rows per call
  TileFn fn = nullptr;
};

// The tiles of one path and dtype, indexed by the number of x rows mr.
struct TileSet {
  static constexpr int kMaxRows = 8;
  int max_mr = 0;                       // largest mr with a kernel; M is cut into tiles of this many rows
  TileKernel by_mr[kMaxRows + 1] = {};  // by_mr[mr] for 1 <= mr <= max_mr
};

// float -> bfloat16 bits, rounding to nearest even (NaN stays a quiet NaN).
inline uint16_t bf16_bits_from_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float float_from_bf16_bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;  // bfloat16 is a float's high half
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Stores a tile's float sums [mr][nr] (row stride nr) the portable way.
template <typename T>
inline void store_sums(const TileArgs& a, int mr, int nr, const float* sums) {
  T* out = static_cast<T*>(a.out);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < a.nr_store; ++j) {
      const float v = a.bias != nullptr ? sums[i * nr + j] + a.bias[j] : sums[i * nr + j];
      if constexpr (sizeof(T) == 2) {
        out[i * a.ldo + a.col[j]] = bf16_bits_from_float(v);
      } else {
        out[i * a.ldo + a.col[j]] = v;
      }
    }
}

// Each returns the tiles of its path, or nullptr where the path is not
// compiled for this architecture. Whether the CPU can run them is checked by
// the caller (linear.cpp).
const TileSet* scalar_tiles_f32();
const TileSet* scalar_tiles_bf16();
const TileSet* avx2_tiles_f32();
const TileSet* avx2_tiles_bf16();
const TileSet* avx512_tiles_f32();
const TileSet* avx512_tiles_bf16();

}  // namespace nnsight::kernels::detail
