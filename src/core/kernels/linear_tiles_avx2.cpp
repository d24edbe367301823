// AVX2 + FMA tiles of the CPU linear kernel (see linear_tiles.h for the contract).
//
// Per output element: one 8-lane float accumulator; lane l sums the products
// at k = l, l + 8, l + 16, ... in increasing k with one FMA per 8 k (bfloat16
// inputs are widened exactly to float first). The last partial step reads
// zeros past K. The 8 lanes are then added by the tree of hsum8: l + 4, + 2, + 1.
#include "core/kernels/linear_tiles.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include <cstring>

#include "core/kernels/linear_store_avx2.h"

#define NNSIGHT_AVX2 __attribute__((target("avx2,fma")))

namespace nnsight::kernels::detail {

namespace {

using avx2::hsum8;

// Lanes [0, n) of a load mask (n in [0, 8]).
NNSIGHT_AVX2 inline __m256i lane_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

struct F32 {
  using T = float;
  NNSIGHT_AVX2 static inline __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  NNSIGHT_AVX2 static inline __m256 load_part(const float* p, int64_t n) { return _mm256_maskload_ps(p, lane_mask(n)); }
};

struct BF16 {
  using T = uint16_t;
  // bfloat16 is the high half of a float: widening is a 16-bit shift, exact.
  NNSIGHT_AVX2 static inline __m256 load(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  NNSIGHT_AVX2 static inline __m256 load_part(const uint16_t* p, int64_t n) {
    uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
    return load(buf);
  }
};

template <class E, int MR, int NR>
NNSIGHT_AVX2 void tile(const TileArgs& a) {
  using T = typename E::T;
  const T* x[MR];
  const T* w[NR];
  for (int i = 0; i < MR; ++i) x[i] = static_cast<const T*>(a.x[i]);
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const T*>(a.w[j]);
  const int64_t K = a.k, prefetch = a.prefetch;
  __m256 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 wk[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wk[j] = E::load(w[j] + k);
    if (prefetch != 0 && (k * int64_t(sizeof(T))) % 64 == 0) {  // once per cache line
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(w[j] + k) + prefetch, _MM_HINT_T1);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 xk = E::load(x[i] + k);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xk, wk[j], acc[i][j]);
    }
  }
  if (k < K) {
    const int64_t n = K - k;
    __m256 wk[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wk[j] = E::load_part(w[j] + k, n);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 xk = E::load_part(x[i] + k, n);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xk, wk[j], acc[i][j]);
    }
  }
  float sums[MR * NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) sums[i * NR + j] = hsum8(acc[i][j]);
  store_sums<T>(a, MR, NR, sums);
}

// w rows per tile for each mr, keeping the accumulators and loaded vectors
// within the 16 vector registers.
template <class E>
TileSet make_set() {
  TileSet s;
  s.max_mr = 4;
  s.by_mr[1] = TileKernel{4, &tile<E, 1, 4>};
  s.by_mr[2] = TileKernel{4, &tile<E, 2, 4>};
  s.by_mr[3] = TileKernel{3, &tile<E, 3, 3>};
  s.by_mr[4] = TileKernel{3, &tile<E, 4, 3>};
  return s;
}

}  // namespace

const TileSet* avx2_tiles_f32() {
  static const TileSet set = make_set<F32>();
  return &set;
}

const TileSet* avx2_tiles_bf16() {
  static const TileSet set = make_set<BF16>();
  return &set;
}

}  // namespace nnsight::kernels::detail

#else  // not x86-64: the path does not exist

namespace nnsight::kernels::detail {
const TileSet* avx2_tiles_f32() { return nullptr; }
const TileSet* avx2_tiles_bf16() { return nullptr; }
}  // namespace nnsight::kernels::detail

#endif
