// The 8-bit-activation tiles (packed_linear_q8.h) for x86-64 CPUs with AVX2
// and no AVX-512 VNNI (Zen 2 / Zen 3, Intel client cores), llama.cpp's AVX2
// scheme: `vpmaddubsw` multiplies 32 unsigned by 32 signed bytes into 16
// pairwise sums, `vpmaddwd` by ones widens them into 8 int32 lanes. Also the
// Q4_0 and K-quant tiles (Q4_K, Q5_K, Q6_K) of every instruction set: for the
// K-quants `vpmaddwd` multiplies the pairwise sums by the sub-block's integer
// scale, so a whole 256-element super-block sums in int32 and is scaled once.
//
// Exactness of the integer sums: a Q4_1 or Q4_0 nibble (0-15) times a rounded
// activation (-127..127) pairs to at most 3810; a Q8_0 weight enters as |w|
// (0-128, the sign moved onto the activation with `vpsignb`, which cannot
// overflow on -127..127) and pairs to at most 32512: below vpmaddubsw's
// saturation at 32767 either way. So each block's dot product is the exact
// integer the reference computes; only the float scaling and the sum over
// blocks round, in an order fixed per output element (lane l of one 8-lane
// accumulator takes elements 4l..4l+3 of every block, block after block, then
// a fixed tree) whatever the tile's row count: batch invariant. The sums are
// not bitwise the AVX-512 tiles' (their lanes split a block's product
// otherwise); both are within float32 rounding of the reference
// (tests/core/kernels/packed_linear_q8_test.cpp).
//
// The rounded row: one rounding serves Q4_0, Q4_1 and Q8_0 (the activation
// is the signed operand of all three), laid out per row of K = 32 nb elements as
//   nb x 32 bytes: the block's q_k in element order (its nibbles' low halves
//                  are elements 0-15, the high halves 16-31: one AND and one
//                  shift put the weights in the same order);
//   nb x 32 bytes: 8 floats per block, its sum s in lane 0 and zeros (Q4_1's
//                  min term enters its accumulator with one FMA, in lane 0);
//   nb floats:     the block's scale d;
// padded to 64 bytes.
//
// The K-quants' rounding (llama.cpp's Q8_K, with its scale as amax / 127 like
// the 32-blocks'): one scale per super-block of 256 elements, so that the
// integer sums of all its sub-blocks add up before any float, laid out as
//   n x 256 bytes: q_k in element order;
//   n x 16 int16:  the sums of q over each 16 elements (Q4_K's min term and
//                  Q6_K's offset of 32 enter through them);
//   n floats:      the super-block's scale d;
// padded to 64 bytes.
//
// Exactness of the K-quant sums: a Q4_K nibble pairs to at most 3810, a Q5_K
// 5-bit value to 7874, a Q6_K 6-bit value (0-63, before its offset) to 16002,
// then times a scale of at most 63 (Q4_K, Q5_K: unsigned) or 128 (Q6_K, int8)
// per pair of pairs: at most 4.2 million per lane and 32 elements, 34 million
// per super-block, within int32. The super-block's eight int32 lanes are converted to float and scaled
// once (Q4_K and Q5_K: its scale term and its min term; exact below 2^24, else
// rounded once).
#include "core/kernels/packed_linear_q8_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/kernels/packed_kscales.h"

#define NNSIGHT_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))
#define NNSIGHT_Q8_AVX2_INLINE NNSIGHT_Q8_AVX2 inline __attribute__((always_inline))

namespace nnsight::kernels::detail {

namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kQ40Bytes = 18;  // Q4_0 block: f16 d, 16 bytes of nibbles
constexpr int64_t kQ41Bytes = 20;  // Q4_1 block: f16 d, f16 m, 16 bytes of nibbles
constexpr int64_t kQ80Bytes = 34;  // Q8_0 block: f16 d, 32 int8
constexpr int kMaxRows = 2;        // 2 x kQ8Cols accumulators: the 16 ymm registers hold them and the operands

constexpr int64_t kSuper = 256;     // elements per K-quant super-block
constexpr int64_t kQ4KBytes = 144;  // Q4_K: f16 d, f16 dmin, 12 scale/min bytes, 128 bytes of nibbles
constexpr int64_t kQ5KBytes = 176;  // Q5_K: Q4_K's fields with 32 bytes of fifth bits (qh) before the nibbles
constexpr int64_t kQ6KBytes = 210;  // Q6_K: 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d

int64_t row_bytes(int64_t K) {
  const int64_t nb = K / kBlock;
  return (nb * (32 + 32 + 4) + 63) / 64 * 64;
}

int64_t k_row_bytes(int64_t K) {
  const int64_t n = K / kSuper;
  return (n * (256 + 32 + 4) + 63) / 64 * 64;
}

NNSIGHT_Q8_AVX2_INLINE int32_t sum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

NNSIGHT_Q8_AVX2_INLINE float max8(__m256 m) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

NNSIGHT_Q8_AVX2_INLINE __m256 abs8(const float* x) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.f), _mm256_loadu_ps(x));
}

// 8 elements of x times id as int32, rounded to nearest (even) explicitly,
// as the AVX-512 rounding does, whatever the thread's rounding mode.
NNSIGHT_Q8_AVX2_INLINE __m256i round8(const float* x, __m256 id) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), id), kNearest));
}

// 32 elements of x times id, rounded to int8 into q (32 bytes, aligned);
// the sums of the first and of the last 16.
struct Sums16 {
  int32_t first, second;
};
NNSIGHT_Q8_AVX2_INLINE Sums16 quantize32(const float* x, __m256 id, uint8_t* q) {
  // vpackssdw / vpacksswb work within 128-bit halves: the dwords of the packed
  // bytes come out as elements 0-3, 8-11, 16-19, 24-27, 4-7, 12-15, ...
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i q0 = round8(x, id), q1 = round8(x + 8, id), q2 = round8(x + 16, id), q3 = round8(x + 24, id);
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(packed, order));
  return {sum_i32(_mm256_add_epi32(q0, q1)), sum_i32(_mm256_add_epi32(q2, q3))};
}

// 127 / amax, or 0 where that is not finite (amax 0, below about 3.7e-37, or
// NaN): such a block rounds to zeros.
NNSIGHT_Q8_AVX2_INLINE float inverse_step(float amax) {
  const float id = 127.f / amax;
  return std::isfinite(id) ? id : 0.f;
}

// The rounding of packed_linear_q8.h (llama.cpp's quantize_row_q8_1): d =
// amax / 127, q = nearbyint(x * (127 / amax)) (to nearest even), s = d sum q.
NNSIGHT_Q8_AVX2 void round_row(const float* x, int64_t K, uint8_t* out) {
  const int64_t nb = K / kBlock;
  float* s_out = reinterpret_cast<float*>(out + 32 * nb);
  float* d_out = reinterpret_cast<float*>(out + 64 * nb);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + kBlock * b;
    const float amax =
        max8(_mm256_max_ps(_mm256_max_ps(abs8(xb), abs8(xb + 8)), _mm256_max_ps(abs8(xb + 16), abs8(xb + 24))));
    const float d = amax / 127.f;
    const Sums16 sums = quantize32(xb, _mm256_set1_ps(inverse_step(amax)), out + 32 * b);
    _mm256_store_ps(s_out + 8 * b, _mm256_setr_ps(d * static_cast<float>(sums.first + sums.second), 0.f, 0.f, 0.f, 0.f,
                                                  0.f, 0.f, 0.f));
    d_out[b] = d;
  }
}

// The same rounding over super-blocks of 256 (one amax each).
NNSIGHT_Q8_AVX2 void k_round_row(const float* x, int64_t K, uint8_t* out) {
  const int64_t n = K / kSuper;
  int16_t* sums_out = reinterpret_cast<int16_t*>(out + 256 * n);
  float* d_out = reinterpret_cast<float*>(out + 288 * n);
  for (int64_t sb = 0; sb < n; ++sb) {
    const float* xs = x + kSuper * sb;
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 32; ++k) m = _mm256_max_ps(m, abs8(xs + 8 * k));
    const float amax = max8(m);
    const __m256 id = _mm256_set1_ps(inverse_step(amax));
    for (int c = 0; c < 8; ++c) {
      const Sums16 sums = quantize32(xs + 32 * c, id, out + 256 * sb + 32 * c);
      sums_out[16 * sb + 2 * c] = static_cast<int16_t>(sums.first);
      sums_out[16 * sb + 2 * c + 1] = static_cast<int16_t>(sums.second);
    }
    d_out[sb] = amax / 127.f;
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

// A tile's accumulators: one 8-lane vector per output element.
template <int MR>
NNSIGHT_Q8_AVX2_INLINE void zero(__m256 (&acc)[MR][kQ8Cols]) {
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < kQ8Cols; ++r) acc[i][r] = _mm256_setzero_ps();
}

template <int MR>
NNSIGHT_Q8_AVX2_INLINE void store_sums(const __m256 (&acc)[MR][kQ8Cols], float* res) {
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < kQ8Cols; ++r) res[i * kQ8Cols + r] = sum8(acc[i][r]);
}

// Asks for `lines` cache lines at `offset` of each of the tile's w rows.
NNSIGHT_Q8_AVX2_INLINE void prefetch_rows(const uint8_t* const* w, int64_t offset, int lines) {
#pragma GCC unroll 4
  for (int r = 0; r < kQ8Cols; ++r) {
    const char* p = reinterpret_cast<const char*>(w[r] + offset);
#pragma GCC unroll 4
    for (int l = 0; l < lines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T1);
  }
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

// Q4_0, per block: dw d_x sum n_k q_k - 8 dw s_x: Q4_1's with m = -8 dw
// (exact in float), since a Q4_0 weight is dw (n_k - 8).
struct Q40 : Q41 {
  static constexpr int64_t kBytes = kQ40Bytes;
  NNSIGHT_Q8_AVX2_INLINE static Block load(const uint8_t* p) {
    const __m256 dw = _mm256_broadcastss_ps(half1(p));
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    return {dw, _mm256_mul_ps(dw, _mm256_set1_ps(-8.f)),
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F))};
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
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) x[i] = rounded(xq[i], nb);
  __m256 acc[MR][kQ8Cols];
  zero<MR>(acc);
  for (int64_t g = 0; g < nb; g += 4) {
    prefetch_rows(w, g * T::kBytes + prefetch, T::kPrefetchLines);
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
  store_sums<MR>(acc, res);
}

// A K-rounded row's parts.
struct KRow {
  const uint8_t* q;     // [n, 256]
  const int16_t* sums;  // [n, 16]
  const float* d;       // [n]
};

NNSIGHT_Q8_AVX2_INLINE KRow k_rounded(const uint8_t* xq, int64_t n) {
  return {xq, reinterpret_cast<const int16_t*>(xq + 256 * n), reinterpret_cast<const float*>(xq + 288 * n)};
}

// The word pattern that vpshufb uses to broadcast 16-bit word w of each
// 128-bit half to the whole half.
NNSIGHT_Q8_AVX2_INLINE __m256i word_broadcast(int w) {
  return _mm256_set1_epi16(static_cast<int16_t>(((2 * w + 1) << 8) | (2 * w)));
}

// Q4_K, per super-block: d d_x sum_s scale_s sum_k n_k q_k - dmin d_x sum_s
// min_s (q sums of sub-block s), both sums in int32. kFive: Q5_K, whose
// values take a fifth bit (bit s of qh[l] for element l of sub-block s).
template <int MR, bool kFive>
NNSIGHT_Q8_AVX2 void q45_k_tile(const uint8_t* const* xq, const uint8_t* const* w, int64_t n, int64_t prefetch,
                                float* res) {
  constexpr int64_t kBytes = kFive ? kQ5KBytes : kQ4KBytes;
  constexpr int64_t kNibbles = kFive ? 48 : 16;  // offset of the nibbles
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  KRow x[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) x[i] = k_rounded(xq[i], n);
  __m256 acc[MR][kQ8Cols];
  zero<MR>(acc);
  for (int64_t sb = 0; sb < n; ++sb) {
    prefetch_rows(w, sb * kBytes + prefetch, 3);  // 144 (Q4_K) or 176 (Q5_K) bytes
#pragma GCC unroll 4
    for (int r = 0; r < kQ8Cols; ++r) {
      const uint8_t* p = w[r] + sb * kBytes;
      // Q5_K: bits 2j and 2j + 1 of each byte, moved to bits 0 and 1 as j goes.
      __m256i qh = kFive ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)) : _mm256_setzero_si256();
      const __m128i sm = k_scales_mins_u8(p);                                     // scales 0-7, mins 0-7
      const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));  // 8 words, in both halves
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));       // min s in words 2s, 2s + 1
      __m256i sum[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) sum[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {  // 64 elements: sub-blocks 2j (low nibbles) and 2j + 1 (high)
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kNibbles + 32 * j));
        __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        if constexpr (kFive) {
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
          qh = _mm256_srli_epi16(qh, 2);
        }
        const __m256i sc_lo = _mm256_shuffle_epi8(scales, word_broadcast(2 * j));
        const __m256i sc_hi = _mm256_shuffle_epi8(scales, word_broadcast(2 * j + 1));
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) {
          const uint8_t* q = x[i].q + kSuper * sb + 64 * j;
          const __m256i a = _mm256_madd_epi16(
              _mm256_maddubs_epi16(lo, _mm256_load_si256(reinterpret_cast<const __m256i*>(q))), sc_lo);
          const __m256i b = _mm256_madd_epi16(
              _mm256_maddubs_epi16(hi, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32))), sc_hi);
          sum[i] = _mm256_add_epi32(sum[i], _mm256_add_epi32(a, b));
        }
      }
      const __m128 dm = halves2(p);
      const __m256 d = _mm256_broadcastss_ps(dm), dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m256i m = _mm256_madd_epi16(
            mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].sums + 16 * sb)));  // [8] int32
        const __m256 dx = _mm256_broadcast_ss(x[i].d + sb);
        acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[i]), _mm256_mul_ps(d, dx), acc[i][r]);
        acc[i][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dx), acc[i][r]);
      }
    }
  }
  store_sums<MR>(acc, res);
}

// Q6_K, per super-block: d d_x (sum_g scale_g sum_k u_k q_k - 32 sum_g
// scale_g (q sum of group g)), u the unsigned 6-bit values, g the 16 groups
// of 16 elements (scale g is group g's, in element order).
template <int MR>
NNSIGHT_Q8_AVX2 void q6_k_tile(const uint8_t* const* xq, const uint8_t* const* w, int64_t n, int64_t prefetch,
                               float* res) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3);
  // Words 0 (low half) and 1 (high half) of each dword: a chunk's two scales.
  const __m256i pair =
      _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  KRow x[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) x[i] = k_rounded(xq[i], n);
  __m256 acc[MR][kQ8Cols];
  zero<MR>(acc);
  for (int64_t sb = 0; sb < n; ++sb) {
    prefetch_rows(w, sb * kQ6KBytes + prefetch, 4);  // 210 bytes
#pragma GCC unroll 4
    for (int r = 0; r < kQ8Cols; ++r) {
      const uint8_t* p = w[r] + sb * kQ6KBytes;
      const __m256i scales =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));  // [16] int16
      __m256i sum[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) sum[i] = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {  // 128 elements: 64 ql bytes, 32 qh bytes
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
        const __m256i u[4] = {
            _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, low2), 4)),
            _mm256_or_si256(_mm256_and_si256(ql1, low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), low2), 4)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), low2), 4)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), low2), 4))};
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {  // elements 128 h + 32 c ..: groups 8 h + 2 c and 8 h + 2 c + 1
          const __m256i sc =
              _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(4 * h + c)), pair);
#pragma GCC unroll 4
          for (int i = 0; i < MR; ++i) {
            const __m256i xv =
                _mm256_load_si256(reinterpret_cast<const __m256i*>(x[i].q + kSuper * sb + 128 * h + 32 * c));
            sum[i] = _mm256_add_epi32(sum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u[c], xv), sc));
          }
        }
      }
      const __m256 d = _mm256_broadcastss_ps(half1(p + 208));
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m256i offset = _mm256_slli_epi32(
            _mm256_madd_epi16(scales, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].sums + 16 * sb))),
            5);  // 32 sum_g scale_g (q sum of g), [8] int32
        const __m256 dx = _mm256_broadcast_ss(x[i].d + sb);
        acc[i][r] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum[i], offset)), _mm256_mul_ps(d, dx), acc[i][r]);
      }
    }
  }
  store_sums<MR>(acc, res);
}

const Q8Rounding kBlockRounding{row_bytes, round_row};
const Q8Rounding kSuperRounding{k_row_bytes, k_round_row};

}  // namespace

const Q8Kernels* avx2_q8_kernels() {
  static const Q8Kernels k{"AVX2",
                           {&kBlockRounding, kMaxRows, {nullptr, tile<1, Q40>, tile<2, Q40>}},
                           {&kBlockRounding, kMaxRows, {nullptr, tile<1, Q41>, tile<2, Q41>}},
                           {&kBlockRounding, kMaxRows, {nullptr, tile<1, Q80>, tile<2, Q80>}},
                           {&kSuperRounding, kMaxRows, {nullptr, q45_k_tile<1, false>, q45_k_tile<2, false>}},
                           {&kSuperRounding, kMaxRows, {nullptr, q45_k_tile<1, true>, q45_k_tile<2, true>}},
                           {&kSuperRounding, kMaxRows, {nullptr, q6_k_tile<1>, q6_k_tile<2>}}};
  return &k;
}

}  // namespace nnsight::kernels::detail

#else

namespace nnsight::kernels::detail {
const Q8Kernels* avx2_q8_kernels() { return nullptr; }
}  // namespace nnsight::kernels::detail

#endif
