// The AVX-512 reduction and store of the linear kernel's register tiles,
// shared by the float32/bfloat16 tiles (linear_tiles_avx512.cpp) and the
// packed-weight tiles (packed_linear_avx512.cpp), so every tile reduces its
// accumulators with the one horizontal-add tree: lanes (l, l + 8), then
// (l, l + 4), (l, l + 2), (l, l + 1); bias added in float after the tree.
// Include only from x86-64 GCC/Clang translation units, after <immintrin.h>.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "core/kernels/linear_tiles.h"

#define NNSIGHT_AVX512_F32 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define NNSIGHT_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))

namespace nnsight::kernels::detail::avx512 {

// After a reduction pass over accumulators [G, G + P), lane L holds the sum
// of accumulator G + 4 (L % 4) + L / 4.
constexpr int accumulator_of_lane(int g, int lane) { return g + 4 * (lane % 4) + lane / 4; }

// The sums of accumulators [G, G + P) (P = 8 or 16; missing ones are zeros),
// in the lane order above.
template <int NA, int G, int P>
NNSIGHT_AVX512_F32 inline __m512 reduce_pass(const __m512 (&acc)[NA]) {
  __m512 v[16];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) v[i] = G + i < NA ? acc[G + i < NA ? G + i : 0] : _mm512_setzero_ps();
  // Lanes l, l + 8: c[p] holds accumulator 2p's 8 partial sums, then 2p + 1's.
  __m512 c[8];
#pragma GCC unroll 8
  for (int p = 0; p < P / 2; ++p)
    c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
  // Lanes l, l + 4: 128-bit quarter t of e[q] holds accumulator 4q + t's 4 partial sums.
  __m512 e[4];
#pragma GCC unroll 4
  for (int q = 0; q < P / 4; ++q)
    e[q] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lanes l, l + 2: quarter t of h[r] holds 2 sums of accumulator 8r + t, then 2 of 8r + 4 + t.
  __m512 h[2];
#pragma GCC unroll 2
  for (int r = 0; r < P / 8; ++r)
    h[r] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * r], e[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(e[2 * r], e[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  if (P == 8) h[1] = h[0];
  // Lanes l, l + 1.
  return _mm512_add_ps(_mm512_shuffle_ps(h[0], h[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(h[0], h[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Per lane of a pass, the tile column j of its accumulator (accumulator a is
// x row a / NR, w row a % NR).
template <int NA, int NR, int G>
constexpr std::array<int32_t, 16> column_of_lanes() {
  std::array<int32_t, 16> idx{};
  for (int lane = 0; lane < 16; ++lane) {
    const int a = accumulator_of_lane(G, lane);
    idx[static_cast<size_t>(lane)] = a < NA ? a % NR : 0;
  }
  return idx;
}

// Sums plus bias (when there is one), in lane order.
template <int NA, int NR, int G>
NNSIGHT_AVX512_F32 inline __m512 add_bias(__m512 s, const float* bias) {
  if (bias == nullptr) return s;
  static constexpr std::array<int32_t, 16> idx = column_of_lanes<NA, NR, G>();
  const __m512 b = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << NR) - 1u), bias);
  return _mm512_add_ps(s, _mm512_permutexvar_ps(_mm512_loadu_si512(idx.data()), b));
}

// Writes the lanes of a pass to their output elements.
template <typename T, int NA, int NR, int G, int P>
inline void scatter(const TileArgs& a, const T* lanes) {
  T* out = static_cast<T*>(a.out);
#pragma GCC unroll 16
  for (int lane = 0; lane < 16; ++lane) {
    const int acc = accumulator_of_lane(G, lane);
    if (acc >= NA || acc >= G + P) continue;
    const int i = acc / NR, j = acc % NR;
    if (j < a.nr_store) out[i * a.ldo + a.col[j]] = lanes[lane];
  }
}

// Reduce accumulators [G, NA) and store them, 16 (or a last 8) at a time.
struct StoreF32 {
  template <int NA, int NR, int G = 0>
  NNSIGHT_AVX512_F32 static inline void all(const __m512 (&acc)[NA], const TileArgs& a) {
    if constexpr (NA - G > 0) {
      constexpr int P = NA - G > 8 ? 16 : 8;
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, add_bias<NA, NR, G>(reduce_pass<NA, G, P>(acc), a.bias));
      scatter<float, NA, NR, G, P>(a, lanes);
      all<NA, NR, G + P>(acc, a);
    }
  }
};

struct StoreBF16 {
  template <int NA, int NR, int G = 0>
  NNSIGHT_AVX512_BF16 static inline void all(const __m512 (&acc)[NA], const TileArgs& a) {
    if constexpr (NA - G > 0) {
      constexpr int P = NA - G > 8 ? 16 : 8;
      alignas(32) uint16_t lanes[16];
      const __m256bh r = _mm512_cvtneps_pbh(add_bias<NA, NR, G>(reduce_pass<NA, G, P>(acc), a.bias));
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), (__m256i)r);
      scatter<uint16_t, NA, NR, G, P>(a, lanes);
      all<NA, NR, G + P>(acc, a);
    }
  }
};

}  // namespace nnsight::kernels::detail::avx512
