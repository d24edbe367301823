// The 8-bit-activation tiles (packed_linear_q8.h) for x86-64 CPUs with AVX2
// and no AVX-512 VNNI (Zen 2 / Zen 3, Intel client cores), llama.cpp's AVX2
// scheme: `vpmaddubsw` multiplies 32 unsigned by 32 signed bytes into 16
// pairwise sums, `vpmaddwd` by ones widens them into 8 int32 lanes.
//
// Exactness of the integer sums: a Q4_1 nibble (0-15) times a rounded
// activation (-127..127) pairs to at most 3810; a Q8_0 weight enters as |w|
// (0-128, the sign moved onto the activation with `vpsignb`, which cannot
// overflow on -127..127) and pairs to at most 32512: below vpmaddubsw's
// saturation at 32767 either way. So each block's dot product is the exact
// integer the reference computes; only the float scaling and the sum over
// blocks round, in an order fixed per output element (lane l of one 8-lane
// accumulator takes elements l and l + 8 (and 16 + l, 24 + l) of every block,
// block after block, then a fixed tree) whatever the tile's row count: batch
// invariant. The sums are not bitwise the AVX-512 tiles' (their lanes split a
// block's product otherwise); both are within float32 rounding of the
// reference (tests/core/kernels/packed_linear_q8_test.cpp).
//
// The rounded row: one rounding serves Q4_1 and Q8_0 (the activation is the
// signed operand of both), laid out per row of K = 32 nb elements as
//   nb x 32 bytes: the block's q_k in element order (its nibbles' low halves
//                  are elements 0-15, the high halves 16-31: one AND and one
//                  shift put the weights in the same order);
//   nb x 32 bytes: 8 floats per block, its sum s in lane 0 and zeros (Q4_1's
//                  min term enters its accumulator with one FMA, in lane 0);
//   nb floats:     the block's scale d;
// padded to 64 bytes.
#include "core/kernels/packed_linear_q8_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define NNSIGHT_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))
#define NNSIGHT_Q8_AVX2_INLINE NNSIGHT_Q8_AVX2 inline __attribute__((always_inline))

namespace nnsight::kernels::detail {

namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kQ41Bytes = 20;  // Q4_1 block: f16 d, f16 m, 16 bytes of nibbles
constexpr int64_t kQ80Bytes = 34;  // Q8_0 block: f16 d, 32 int8
constexpr int kMaxRows = 2;        // 2 x kQ8Cols accumulators: the 16 ymm registers hold them and the operands

int64_t row_bytes(int64_t K) {
  const int64_t nb = K / kBlock;
  return (nb * (32 + 32 + 4) + 63) / 64 * 64;
}

int rounding_of(PackedType) { return 0; }

// The rounding of packed_linear_q8.h (llama.cpp's quantize_row_q8_1): d =
// amax / 127, q = nearbyint(x * (127 / amax)) (the current rounding mode, to
// nearest even by default, as the reference's std::nearbyint), s = d sum q.
NNSIGHT_Q8_AVX2 void round_row(const float* x, int64_t K, int, uint8_t* out) {
  const int64_t nb = K / kBlock;
  uint8_t* q_out = out;
  float* s_out = reinterpret_cast<float*>(out + 32 * nb);
  float* d_out = reinterpret_cast<float*>(out + 64 * nb);
  const __m256 sign = _mm256_set1_ps(-0.f);
  // vpackssdw / vpacksswb work within 128-bit halves: the dwords of the packed
  // bytes come out as elements 0-3, 8-11, 16-19, 24-27, 4-7, 12-15, ...
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + kBlock * b;
    const __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8), v2 = _mm256_loadu_ps(xb + 16),
                 v3 = _mm256_loadu_ps(xb + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                   _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.f;
    const __m256 id = _mm256_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    _mm256_store_si256(reinterpret_cast<__m256i*>(q_out + 32 * b), _mm256_permutevar8x32_epi32(packed, order));
    const __m256i sum8 = _mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3));
    __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
    sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, _MM_SHUFFLE(1, 0, 3, 2)));
    sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, _MM_SHUFFLE(2, 3, 0, 1)));
    _mm256_store_ps(s_out + 8 * b,
                    _mm256_setr_ps(d * static_cast<float>(_mm_cvtsi128_si32(sum4)), 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f));
    d_out[b] = d;
  }
}

// The rounded row's parts for a tile's row.
struct RoundedRow {
  const uint8_t* q;  // [nb, 32]
  const float* s;    // [nb, 8]
  const float* d;    // [nb]
};

NNSIGHT_Q8_AVX2_INLINE RoundedRow rounded(const uint8_t* xq, int64_t nb) {
  return {xq, reinterpret_cast<const float*>(xq + 32 * nb), reinterpret_cast<const float*>(xq + 64 * nb)};
}

NNSIGHT_Q8_AVX2_INLINE float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The two f16 words at p as floats in lanes 0 and 1.
NNSIGHT_Q8_AVX2_INLINE __m128 halves2(const uint8_t* p) {
  int32_t bits;
  std::memcpy(&bits, p, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
}

NNSIGHT_Q8_AVX2_INLINE __m128 half1(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
}

// Q4_1, per block: dw d_x sum n_k q_k (8 lanes) + mw s_x (lane 0).
struct Q41 {
  static constexpr int64_t kBytes = kQ41Bytes;
  static constexpr int kPrefetchLines = 2;  // 4 blocks: 80 bytes
  struct Block {
    __m256 dw, mw;
    __m256i nib;  // the 32 weights in element order
  };
  NNSIGHT_Q8_AVX2_INLINE static Block load(const uint8_t* p) {
    const __m128 dm = halves2(p);
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4));
    return {_mm256_broadcastss_ps(dm), _mm256_broadcastss_ps(_mm_movehdup_ps(dm)),
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F))};
  }
  NNSIGHT_Q8_AVX2_INLINE static __m256 add(const Block& w, __m256i xv, __m256 dx, const float* s, __m256 acc) {
    const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w.nib, xv), _mm256_set1_epi16(1));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(w.dw, dx), acc);
    return _mm256_fmadd_ps(w.mw, _mm256_load_ps(s), acc);
  }
};

// Q8_0, per block: dw d_x sum w_k q_k, as sum |w_k| (q_k sign(w_k)).
struct Q80 {
  static constexpr int64_t kBytes = kQ80Bytes;
  static constexpr int kPrefetchLines = 3;  // 4 blocks: 136 bytes
  struct Block {
    __m256 dw;
    __m256i w;
  };
  NNSIGHT_Q8_AVX2_INLINE static Block load(const uint8_t* p) {
    return {_mm256_broadcastss_ps(half1(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2))};
  }
  NNSIGHT_Q8_AVX2_INLINE static __m256 add(const Block& w, __m256i xv, __m256 dx, const float*, __m256 acc) {
    const __m256i aw = _mm256_sign_epi8(w.w, w.w);  // |w|, -128 as the unsigned 128
    const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, w.w)), _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(w.dw, dx), acc);
  }
};

// The tile: block by block, each row of x's block loaded once for the
// tile's kQ8Cols rows of w, each w block decoded once for its MR rows of x.
template <int MR, class T>
NNSIGHT_Q8_AVX2 void tile(const uint8_t* const* xq, const uint8_t* const* w, int64_t nb, int64_t prefetch, float* res) {
  RoundedRow x[MR];
  __m256 acc[MR][kQ8Cols];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    x[i] = rounded(xq[i], nb);
#pragma GCC unroll 4
    for (int r = 0; r < kQ8Cols; ++r) acc[i][r] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < nb; g += 4) {
#pragma GCC unroll 4
    for (int r = 0; r < kQ8Cols; ++r) {
      const char* p = reinterpret_cast<const char*>(w[r] + g * T::kBytes + prefetch);
#pragma GCC unroll 4
      for (int l = 0; l < T::kPrefetchLines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T1);
    }
    const int64_t ge = std::min(nb, g + 4);
    for (int64_t b = g; b < ge; ++b) {
      __m256i xv[MR];
      __m256 dx[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        xv[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[i].q + 32 * b));
        dx[i] = _mm256_broadcast_ss(x[i].d + b);
      }
#pragma GCC unroll 4
      for (int r = 0; r < kQ8Cols; ++r) {
        const typename T::Block wb = T::load(w[r] + b * T::kBytes);
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) acc[i][r] = T::add(wb, xv[i], dx[i], x[i].s + 8 * b, acc[i][r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < kQ8Cols; ++r) res[i * kQ8Cols + r] = sum8(acc[i][r]);
}

}  // namespace

const Q8Kernels* avx2_q8_kernels() {
  static const Q8Kernels k{"AVX2",
                           row_bytes,
                           rounding_of,
                           round_row,
                           kMaxRows,
                           {nullptr, tile<1, Q41>, tile<2, Q41>, nullptr, nullptr},
                           {nullptr, tile<1, Q80>, tile<2, Q80>, nullptr, nullptr}};
  return &k;
}

}  // namespace nnsight::kernels::detail

#else

namespace nnsight::kernels::detail {
const Q8Kernels* avx2_q8_kernels() { return nullptr; }
}  // namespace nnsight::kernels::detail

#endif
