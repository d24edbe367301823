// AVX-512 tiles of the CPU linear kernel (see linear_tiles.h for the contract).
//
// Per output element the order is fixed by K alone: one 16-lane float
// accumulator; lane l sums the products at k = l, l + 16, l + 32, ... in
// increasing k (float32: one FMA per 16 k; bfloat16: one vdpbf16ps per 32 k,
// lane l taking the pair k = 2l, 2l + 1 of each 32-wide step). The last partial
// step loads with a zero-filling mask. The 16 lanes are then added by one tree:
// lanes (l, l + 8), then (l, l + 4), (l, l + 2), (l, l + 1) -- computed for 8
// or 16 accumulators at once by transposing as it adds (IEEE addition is
// commutative, so which operand comes first in a pair does not matter). The
// bias is added in float and bfloat16 results are rounded by vcvtneps2bf16
// (nearest even; like vdpbf16ps it flushes subnormals to zero).
#include "core/kernels/linear_tiles.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12 reports the intrinsics' own _mm512_undefined_* placeholders as
// uninitialized once they are inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <array>

#define NNSIGHT_AVX512_F32 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define NNSIGHT_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))

namespace nnsight::kernels::detail {

namespace {

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

template <int MR, int NR>
NNSIGHT_AVX512_F32 void tile_f32(const TileArgs& a) {
  const float* x[MR];
  const float* w[NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) x[i] = static_cast<const float*>(a.x[i]);
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const float*>(a.w[j]);
  const int64_t K = a.k, prefetch = a.prefetch;
  __m512 acc[MR * NR];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NR; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t full = K & ~int64_t(15);
  for (int64_t k = 0; k < full; k += 16) {
    __m512 wk[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wk[j] = _mm512_loadu_ps(w[j] + k);
    if (prefetch != 0) {
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(w[j] + k) + prefetch, _MM_HINT_T1);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      __m512 xk = _mm512_loadu_ps(x[i] + k);
      // Keep x in a register: folded into each FMA it would be loaded nr times.
      __asm__("" : "+v"(xk));
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_fmadd_ps(xk, wk[j], acc[i * NR + j]);
    }
  }
  if (full < K) {
    const __mmask16 m = static_cast<__mmask16>((1u << (K - full)) - 1u);
    __m512 wk[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wk[j] = _mm512_maskz_loadu_ps(m, w[j] + full);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 xk = _mm512_maskz_loadu_ps(m, x[i] + full);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_fmadd_ps(xk, wk[j], acc[i * NR + j]);
    }
  }
  StoreF32::all<MR * NR, NR>(acc, a);
}

template <int MR, int NR>
NNSIGHT_AVX512_BF16 void tile_bf16(const TileArgs& a) {
  const uint16_t* x[MR];
  const uint16_t* w[NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) x[i] = static_cast<const uint16_t*>(a.x[i]);
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const uint16_t*>(a.w[j]);
  const int64_t K = a.k, prefetch = a.prefetch;
  __m512 acc[MR * NR];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NR; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t full = K & ~int64_t(31);
  for (int64_t k = 0; k < full; k += 32) {
    __m512i wk[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wk[j] = _mm512_loadu_si512(w[j] + k);
    if (prefetch != 0) {
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(w[j] + k) + prefetch, _MM_HINT_T1);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512i xk = _mm512_loadu_si512(x[i] + k);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j)
        acc[i * NR + j] = _mm512_dpbf16_ps(acc[i * NR + j], (__m512bh)xk, (__m512bh)wk[j]);
    }
  }
  if (full < K) {
    const __mmask32 m = static_cast<__mmask32>((1u << (K - full)) - 1u);
    __m512i wk[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wk[j] = _mm512_maskz_loadu_epi16(m, w[j] + full);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512i xk = _mm512_maskz_loadu_epi16(m, x[i] + full);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j)
        acc[i * NR + j] = _mm512_dpbf16_ps(acc[i * NR + j], (__m512bh)xk, (__m512bh)wk[j]);
    }
  }
  StoreBF16::all<MR * NR, NR>(acc, a);
}

// w rows per tile for each mr: as many as keep mr * nr accumulators plus the
// loaded vectors within the 32 vector registers.
template <template <int, int> class Tile>
TileSet make_set() {
  TileSet s;
  s.max_mr = 8;
  s.by_mr[1] = TileKernel{4, &Tile<1, 4>::run};
  s.by_mr[2] = TileKernel{4, &Tile<2, 4>::run};
  s.by_mr[3] = TileKernel{4, &Tile<3, 4>::run};
  s.by_mr[4] = TileKernel{4, &Tile<4, 4>::run};
  s.by_mr[5] = TileKernel{4, &Tile<5, 4>::run};
  s.by_mr[6] = TileKernel{4, &Tile<6, 4>::run};
  s.by_mr[7] = TileKernel{3, &Tile<7, 3>::run};
  s.by_mr[8] = TileKernel{3, &Tile<8, 3>::run};
  return s;
}

template <int MR, int NR>
struct F32Tile {
  static void run(const TileArgs& a) { tile_f32<MR, NR>(a); }
};
template <int MR, int NR>
struct BF16Tile {
  static void run(const TileArgs& a) { tile_bf16<MR, NR>(a); }
};

}  // namespace

const TileSet* avx512_tiles_f32() {
  static const TileSet set = make_set<F32Tile>();
  return &set;
}

const TileSet* avx512_tiles_bf16() {
  static const TileSet set = make_set<BF16Tile>();
  return &set;
}

}  // namespace nnsight::kernels::detail

#else  // not x86-64: the path does not exist

namespace nnsight::kernels::detail {
const TileSet* avx512_tiles_f32() { return nullptr; }
const TileSet* avx512_tiles_bf16() { return nullptr; }
}  // namespace nnsight::kernels::detail

#endif
