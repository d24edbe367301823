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

#include "core/kernels/linear_store_avx512.h"

namespace nnsight::kernels::detail {

namespace {

using avx512::StoreBF16;
using avx512::StoreF32;

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
      for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_dpbf16_ps(acc[i * NR + j], (__m512bh)xk, (__m512bh)wk[j]);
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
      for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_dpbf16_ps(acc[i * NR + j], (__m512bh)xk, (__m512bh)wk[j]);
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
