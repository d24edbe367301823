// AVX-512 kernels for packed (block-quantized) weights: a row decoder per
// type and fused register tiles that decode the weights in registers and
// multiply them with float32 activations (see packed_linear.h).
//
// Exactness: each decoder computes every weight with the same float
// operations as the reference decoder (packed_decode.cpp) -- for the 4- and
// 5-bit types by looking the value up in a 16- or 32-entry table computed per
// (sub-)block with those operations (vpermps) -- and the tiles accumulate
// exactly as the float32 AVX-512 tiles of kernels::linear do: one 16-lane
// accumulator per output element, lane l summing k = l, l + 16, ... in
// increasing k with one FMA each, then the shared reduction tree
// (linear_store_avx512.h). So the result is bitwise the float32 kernel's on
// the dequantized matrix, for any number of rows and any thread split.
#include "core/kernels/packed_linear_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12 reports the intrinsics' own _mm512_undefined_* placeholders as
// uninitialized once they are inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>

#include "core/kernels/linear_store_avx512.h"
#include "core/kernels/packed_decode.h"
#include "core/kernels/packed_kscales.h"

// F16C converts the f16 scales (every AVX-512 CPU has it). Its conversion is
// exact like half_to_float's; only a signalling NaN scale comes out quieted
// (half_to_float keeps the payload as is): NaN weights either way.
#define NNSIGHT_PACKED_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define NNSIGHT_AVX512_INLINE NNSIGHT_PACKED_TARGET inline __attribute__((always_inline))

namespace nnsight::kernels::detail {

namespace {

using avx512::StoreF32;

NNSIGHT_AVX512_INLINE __m512 iota_ps(float start) {
  return _mm512_add_ps(_mm512_set1_ps(start), _mm512_setr_ps(0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f,
                                                             11.f, 12.f, 13.f, 14.f, 15.f));
}

// The f16 at p, as float in every lane.
NNSIGHT_AVX512_INLINE __m512 half16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(load_u16(p))));
}

// Where the f16 scales of 16 consecutive blocks of kBytes bytes sit, for
// head_scales: 16-bit word i of the result (scale i / 16 of block i % 16) is
// word idx[p][i] of the 64 words of 64-byte loads 2p and 2p + 1, for the
// lanes of mask[p].
template <int kBytes, int kScales>
struct HeadLayout {
  static constexpr int kLoadBytes = 16 * kBytes;
  static constexpr int kPairs = (kLoadBytes + 127) / 128;
  uint16_t idx[kPairs][32] = {};
  uint32_t mask[kPairs] = {};
  constexpr HeadLayout() {
    for (int i = 0; i < 16 * kScales; ++i) {
      const int word = (i % 16) * (kBytes / 2) + i / 16;
      idx[word / 64][i] = static_cast<uint16_t>(word % 64);
      mask[word / 64] |= uint32_t(1) << i;
    }
  }
};

// The kScales f16 scales at the head of each of 16 blocks of kBytes bytes at
// b, as float: scale i of block l at sc[i * stride + l]. Contiguous loads
// (the last one masked to the blocks' bytes) and a two-register word permute
// per 128 bytes: on Zen 4 a third cheaper per block than a broadcast and a
// conversion per scale, where a gather or scalar conversions were dearer.
// Same values as F16C's scalar conversion, so the same bits.
template <int kBytes, int kScales>
NNSIGHT_AVX512_INLINE void head_scales(const uint8_t* b, float* sc, int64_t stride) {
  using L = HeadLayout<kBytes, kScales>;
  static constexpr L layout{};
  __m512i r = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int p = 0; p < L::kPairs; ++p) {
    __m512i v[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int at = 64 * (2 * p + h), left = L::kLoadBytes - at;
      v[h] = left >= 64 ? _mm512_loadu_si512(b + at)
             : left > 0 ? _mm512_maskz_loadu_epi8((__mmask64(1) << left) - 1, b + at)
                        : _mm512_setzero_si512();
    }
    const __m512i idx = _mm512_loadu_si512(layout.idx[p]);
    r = _mm512_mask_mov_epi16(r, layout.mask[p], _mm512_permutex2var_epi16(v[0], idx, v[1]));
  }
  _mm512_storeu_ps(sc, _mm512_cvtph_ps(_mm512_castsi512_si256(r)));
  if constexpr (kScales > 1) _mm512_storeu_ps(sc + stride, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(r, 1)));
}

// a times, plus or minus the float at p (in every lane), the broadcast folded
// into the operation. On Zen 4 a broadcast into a register takes a shuffle
// pipe, the pipes the table lookups are bound by; folded, it takes none. A
// table d * q + m is then a multiply and an add (an FMA takes a multiply pipe
// too; the add runs beside the others): d * q is exact for every type that
// builds one (11 x 6 x 5 bits at most), so the add rounds exactly as the FMA
// and as the reference's multiply-then-add. Written in asm because GCC fuses
// a multiply and an add into an FMA and keeps one broadcast in a register.
NNSIGHT_AVX512_INLINE __m512 mul_broadcast(__m512 a, const float* p) {
  __m512 r;
  asm("vmulps %2%{1to16%}, %1, %0" : "=v"(r) : "v"(a), "m"(*p));
  return r;
}
NNSIGHT_AVX512_INLINE __m512 add_broadcast(__m512 a, const float* p) {
  __m512 r;
  asm("vaddps %2%{1to16%}, %1, %0" : "=v"(r) : "v"(a), "m"(*p));
  return r;
}
NNSIGHT_AVX512_INLINE __m512 sub_broadcast(__m512 a, const float* p) {
  __m512 r;
  asm("vsubps %2%{1to16%}, %1, %0" : "=v"(r) : "v"(a), "m"(*p));
  return r;
}

// 16 bytes -> 16 x int32 (zero-extended).
NNSIGHT_AVX512_INLINE __m512i bytes16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Each type: kBlock elements in kBytes bytes, decoded kWidth (32 or 64) at a
// time, in k order. load() reads a block's scales; group(s, g, w) yields its
// g-th kWidth weights in kWidth / 16 vectors w[0], w[1], ... A type whose
// block starts with kScales > 0 f16 scales also has scales16(), converting
// those of 16 blocks to float, and a load() that takes them so converted (the
// fused tile's scale pass, fused_tile below). group<true> runs in the tiles
// of at most kScaleMaxRows x rows (with those converted scales, where the
// type has them): it takes the scales from memory inside the operations.

struct Q4_0 {
  static constexpr int kBlock = 32, kBytes = 18, kWidth = 32, kScales = 1;
  struct State {
    __m512 table;  // d * (q - 8) for q = 0..15
    const uint8_t* qs;
  };
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    s.table = _mm512_mul_ps(half16(b), iota_ps(-8.f));
    s.qs = b + 2;
  }
  NNSIGHT_AVX512_INLINE static void scales16(const uint8_t* b, float* sc, int64_t stride) {
    head_scales<kBytes, kScales>(b, sc, stride);
  }
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, const float* sc, int64_t, State& s) {
    s.table = mul_broadcast(iota_ps(-8.f), sc);
    s.qs = b + 2;
  }
  template <bool = false>
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512* w) {
    const __m512i z = bytes16(s.qs);  // vpermps reads the low 4 bits: the low nibble
    w[0] = _mm512_permutexvar_ps(z, s.table);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(z, 4), s.table);
  }
};

struct Q4_1 {
  static constexpr int kBlock = 32, kBytes = 20, kWidth = 32, kScales = 2;
  struct State {
    __m512 table;  // d * q + m
    const uint8_t* qs;
  };
  // d * q is exact in float (11 x 4 significant bits), so one FMA rounds
  // d * q + m exactly as the reference's multiply-then-add does.
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    s.table = _mm512_fmadd_ps(half16(b), iota_ps(0.f), half16(b + 2));
    s.qs = b + 4;
  }
  NNSIGHT_AVX512_INLINE static void scales16(const uint8_t* b, float* sc, int64_t stride) {
    head_scales<kBytes, kScales>(b, sc, stride);
  }
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, const float* sc, int64_t stride, State& s) {
    s.table = add_broadcast(mul_broadcast(iota_ps(0.f), sc), sc + stride);
    s.qs = b + 4;
  }
  template <bool = false>
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512* w) {
    const __m512i z = bytes16(s.qs);
    w[0] = _mm512_permutexvar_ps(z, s.table);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(z, 4), s.table);
  }
};

// 5-bit types: two 16-entry tables; the fifth bit (a mask bit per lane)
// picks the upper one. No scale pass (kScales = 0): with it a decode step's
// Q5_0 matmuls ran 5-15 % slower at one row (these tiles are bound by their
// four permutes per block, which the pass's permutes add to).
template <bool kHasMin>
struct Q5_01 {
  static constexpr int kBlock = 32, kBytes = kHasMin ? 24 : 22, kWidth = 32, kScales = 0;
  struct State {
    __m512 lo, hi;  // values of q = 0..15 and q = 16..31
    uint32_t qh;
    const uint8_t* qs;
  };
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    const __m512 d = half16(b);
    if constexpr (kHasMin) {
      const __m512 m = half16(b + 2);
      // d * q exact (11 x 5 bits): the FMA rounds as multiply-then-add does.
      s.lo = _mm512_fmadd_ps(d, iota_ps(0.f), m);
      s.hi = _mm512_fmadd_ps(d, iota_ps(16.f), m);
      std::memcpy(&s.qh, b + 4, 4);
      s.qs = b + 8;
    } else {
      s.lo = _mm512_mul_ps(d, iota_ps(-16.f));
      s.hi = _mm512_mul_ps(d, iota_ps(0.f));
      std::memcpy(&s.qh, b + 2, 4);
      s.qs = b + 6;
    }
  }
  template <bool = false>
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512* w) {
    const __m512i z0 = bytes16(s.qs), z1 = _mm512_srli_epi32(z0, 4);
    w[0] = _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(z0, s.lo), static_cast<__mmask16>(s.qh), z0, s.hi);
    w[1] = _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(z1, s.lo), static_cast<__mmask16>(s.qh >> 16), z1, s.hi);
  }
};
using Q5_0 = Q5_01<false>;
using Q5_1 = Q5_01<true>;

struct Q8_0 {
  static constexpr int kBlock = 32, kBytes = 34, kWidth = 32, kScales = 1;
  struct State {
    __m512 d;        // the scale, when load() converts it
    const float* s;  // the scale in memory, when scales16() has converted it
    const int8_t* qs;
  };
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    s.d = half16(b);
    s.qs = reinterpret_cast<const int8_t*>(b + 2);
  }
  NNSIGHT_AVX512_INLINE static void scales16(const uint8_t* b, float* sc, int64_t stride) {
    head_scales<kBytes, kScales>(b, sc, stride);
  }
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, const float* sc, int64_t, State& s) {
    s.s = sc;
    s.qs = reinterpret_cast<const int8_t*>(b + 2);
  }
  // kConverted: the state came from the second load() (group<true> is
  // called only on those: see kScaleMaxRows).
  template <bool kConverted = false>
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512* w) {
    const __m128i* p = reinterpret_cast<const __m128i*>(s.qs);
#pragma GCC unroll 2
    for (int c = 0; c < 2; ++c) {
      const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p + c)));
      w[c] = kConverted ? mul_broadcast(q, s.s) : _mm512_mul_ps(s.d, q);
    }
  }
};

// Q4_K / Q5_K: eight sub-blocks of 32, each with its (d * scale, dmin * min),
// decoded two at a time: sub-blocks 2g and 2g + 1 are the low and the high
// nibbles of the same 32 bytes, widened once for both.
template <bool kFive>
struct QK45 {
  static constexpr int kBlock = 256, kBytes = kFive ? 176 : 144, kWidth = 64, kScales = 0;
  struct State {
    alignas(32) float d[8];
    alignas(32) float m[8];
    const uint8_t* qh;  // Q5_K only
    const uint8_t* qs;
  };
  // The eight scales and mins widened together (packed_kscales.h).
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    k_scales(b, s.d, s.m);
    s.qh = b + 16;
    s.qs = b + (kFive ? 48 : 16);
  }
  // (d * scale) * q - dmin * min for q = first .. first + 15 of sub-block
  // `sub`. (d * scale) * q is exact (11 x 6 x 5 bits), so either form rounds
  // as the reference's multiply-then-subtract does; with few rows the
  // broadcasts go inside the operations (see mul_broadcast).
  template <bool kFewRows>
  NNSIGHT_AVX512_INLINE static __m512 table(const State& s, int sub, float first) {
    if constexpr (kFewRows) return sub_broadcast(mul_broadcast(iota_ps(first), &s.d[sub]), &s.m[sub]);
    return _mm512_fmsub_ps(_mm512_set1_ps(s.d[sub]), iota_ps(first), _mm512_set1_ps(s.m[sub]));
  }
  // Sub-blocks 2g (w[0], w[1]: low nibbles of bytes 32g .. 32g + 31) and 2g + 1
  // (w[2], w[3]: their high nibbles).
  template <bool kFewRows = false>
  NNSIGHT_AVX512_INLINE static void group(const State& s, int g, __m512* w) {
    const uint8_t* p = s.qs + 32 * g;
    const __m512i lo0 = bytes16(p), lo1 = bytes16(p + 16);
    const __m512i z[4] = {lo0, lo1, _mm512_srli_epi32(lo0, 4), _mm512_srli_epi32(lo1, 4)};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int sub = 2 * g + h;
      const __m512 lo = table<kFewRows>(s, sub, 0.f);
      w[2 * h] = _mm512_permutexvar_ps(z[2 * h], lo);
      w[2 * h + 1] = _mm512_permutexvar_ps(z[2 * h + 1], lo);
      if constexpr (kFive) {
        const __m512 hi = table<kFewRows>(s, sub, 16.f);
        const __mmask32 bit = _mm256_test_epi8_mask(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.qh)),
                                                    _mm256_set1_epi8(static_cast<char>(1 << sub)));
        w[2 * h] = _mm512_mask_permutexvar_ps(w[2 * h], static_cast<__mmask16>(bit), z[2 * h], hi);
        w[2 * h + 1] = _mm512_mask_permutexvar_ps(w[2 * h + 1], static_cast<__mmask16>(bit >> 16), z[2 * h + 1], hi);
      }
    }
  }
};
using Q4_K = QK45<false>;
using Q5_K = QK45<true>;

struct Q6_K {
  static constexpr int kBlock = 256, kBytes = 210, kWidth = 128, kScales = 0;
  struct State {
    alignas(64) float ds[16];  // d * scale, one per 16 elements
    const uint8_t* b;
  };
  // The 16 int8 scales widened together: d * scale, the same float products.
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    const __m512 sc =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192))));
    _mm512_store_ps(s.ds, _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(load_u16(b + 208))), sc));
    s.b = b;
  }
  // Half g (128 elements): element 32 q + l (quarter q, l < 32) is nibble
  // (q / 2 ? high : low) of ql[64 g + 32 (q % 2) + l] with bits 2q..2q+1 of
  // qh[32 g + l] above it, minus 32. The 6-bit values of a whole half are
  // built 64 at a time in bytes, then widened 16 at a time.
  template <bool kFewRows = false>
  NNSIGHT_AVX512_INLINE static void group(const State& s, int g, __m512* w) {
    const __m512i ql = _mm512_loadu_si512(s.b + 64 * g);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b + 128 + 32 * g));
    // Bits 2q..2q+1 of qh moved to bits 4..5: quarters 0 | 1 and 2 | 3.
    const __m512i h01 =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(qh, 4)), _mm256_slli_epi16(qh, 2), 1);
    const __m512i h23 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30), bias = _mm512_set1_epi8(32);
    const __m512i v[2] = {
        _mm512_sub_epi8(_mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(h01, bits45)), bias),
        _mm512_sub_epi8(
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(h23, bits45)), bias)};
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m128i q = c % 4 == 0   ? _mm512_castsi512_si128(v[c / 4])
                        : c % 4 == 1 ? _mm512_extracti32x4_epi32(v[c / 4], 1)
                        : c % 4 == 2 ? _mm512_extracti32x4_epi32(v[c / 4], 2)
                                     : _mm512_extracti32x4_epi32(v[c / 4], 3);
      const __m512 qf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
      // With few rows the scale's broadcast goes inside the multiply (see mul_broadcast).
      w[c] = kFewRows ? mul_broadcast(qf, &s.ds[8 * g + c]) : _mm512_mul_ps(_mm512_set1_ps(s.ds[8 * g + c]), qf);
    }
  }
};

template <class Q>
NNSIGHT_PACKED_TARGET void decode_row(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / Q::kBlock; ++b) {
    typename Q::State s;
    Q::load(src + b * Q::kBytes, s);
#pragma GCC unroll 8
    for (int g = 0; g < Q::kBlock / Q::kWidth; ++g) {
      __m512 w[Q::kWidth / 16];
      Q::group(s, g, w);
      float* y = dst + b * Q::kBlock + Q::kWidth * g;
#pragma GCC unroll 8
      for (int c = 0; c < Q::kWidth / 16; ++c) _mm512_storeu_ps(y + 16 * c, w[c]);
    }
  }
}

// Blocks whose scales the tile converts beforehand, this many blocks of
// every w row at a time (a multiple of 16).
constexpr int64_t kScaleChunk = 64;
// Up to this many x rows the tiles take a block's scales from memory (the
// types with f16 scales at the head of their blocks convert them first, see
// fused_tile) and broadcast them inside the operations that use them
// (group<true>); with more, a block's scales are shared by enough rows that
// converting them in the loop does not show, and both the pass and the
// broadcasts from memory cost more than they save: at 8 rows, a decode
// step's Q4_1 matmuls took 9 % longer with the pass, and one core's Q4_K
// [512, 2048] 55 % longer with the broadcasts from memory.
constexpr int kScaleMaxRows = 4;

// One block of the fused tile: every x row times the block's weights of every w row.
template <class Q, int MR, int NR, bool kStore>
NNSIGHT_AVX512_INLINE void tile_block(const float* const* x, const typename Q::State* s, int64_t b, __m512* acc,
                                      float* const* dst) {
  // With all NR rows' decoded vectors held at once (when they fit in the 32
  // registers beside the accumulators), each x vector is loaded once for the
  // NR rows; otherwise each multiply-add loads its own x vector (at 8 rows
  // GCC kept none in registers: 48 loads for 48 multiply-adds per Q8_0
  // block). At 8 rows, two threads, weights from memory: a decode step's Q4_1
  // projections 11.1-11.5 -> 10.2-10.9 ms, the Q8_0 LM head 2.8-3.2 -> 2.5-2.6
  // ms. Up to 4 rows GCC already kept x in registers.
  constexpr int kVectors = Q::kWidth / 16;
  constexpr bool kHoist = MR > 4 && MR * NR + NR * kVectors + 1 <= 32;
  constexpr bool kFewRows = MR <= kScaleMaxRows;
#pragma GCC unroll 8
  for (int g = 0; g < Q::kBlock / Q::kWidth; ++g) {
    const int64_t k = b * Q::kBlock + Q::kWidth * g;
    if constexpr (kHoist) {
      __m512 w[NR][kVectors];
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) Q::template group<kFewRows>(s[j], g, w[j]);
      if constexpr (kStore) {
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j)
#pragma GCC unroll 8
          for (int c = 0; c < kVectors; ++c) _mm512_storeu_ps(dst[j] + k + 16 * c, w[j][c]);
      }
#pragma GCC unroll 8
      for (int c = 0; c < kVectors; ++c) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          __m512 xv = _mm512_loadu_ps(x[i] + k + 16 * c);
          // Keeps GCC from folding the load back into each multiply-add.
          asm("" : "+v"(xv));
#pragma GCC unroll 8
          for (int j = 0; j < NR; ++j) acc[i * NR + j] = _mm512_fmadd_ps(xv, w[j][c], acc[i * NR + j]);
        }
      }
    } else {
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) {
        __m512 w[kVectors];
        Q::template group<kFewRows>(s[j], g, w);
        if constexpr (kStore) {
#pragma GCC unroll 8
          for (int c = 0; c < kVectors; ++c) _mm512_storeu_ps(dst[j] + k + 16 * c, w[c]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
          for (int c = 0; c < kVectors; ++c)
            acc[i * NR + j] = _mm512_fmadd_ps(_mm512_loadu_ps(x[i] + k + 16 * c), w[c], acc[i * NR + j]);
        }
      }
    }
  }
}

// Block b of every w row times every x row; the rows' scales are converted
// by Q::load, or (kConverted) taken from sc, row j's scale i at
// sc[(j * kScales + i) * stride].
template <class Q, int MR, int NR, bool kConverted, bool kStore>
NNSIGHT_AVX512_INLINE void tile_step(const float* const* x, const uint8_t* const* w, int64_t prefetch, int64_t b,
                                     const float* sc, int64_t stride, __m512* acc, float* const* dst) {
  typename Q::State s[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) {
    const uint8_t* blk = w[j] + b * Q::kBytes;
    // Every cache line of the block ahead: with one prefetch per block, the
    // K-quant blocks (144-210 bytes) had most of their lines left to the
    // hardware prefetchers: a Q6_K [32000, 2048] matrix from memory at one
    // row took 15.9 ms (3.4 GB/s), 9.5 ms with every line asked for (6.4-7.0
    // with the distance packed_linear.cpp now gives).
    if (prefetch != 0) {
#pragma GCC unroll 4
      for (int off = 0; off < Q::kBytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + prefetch + off, _MM_HINT_T0);
    }
    if constexpr (kConverted) {
      Q::load(blk, sc + j * Q::kScales * stride, stride, s[j]);
    } else {
      Q::load(blk, s[j]);
    }
  }
  tile_block<Q, MR, NR, kStore>(x, s, b, acc, dst);
}

// kStore: also stores the decoded weights, w row j's to a.decoded[j] (the
// first row tile of the Tiles path, packed_linear.cpp).
template <class Q, int MR, int NR, bool kStore = false>
NNSIGHT_PACKED_TARGET void fused_tile(const TileArgs& a) {
  const float* x[MR];
  const uint8_t* w[NR];
  float* const* dst = a.decoded;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) x[i] = static_cast<const float*>(a.x[i]);
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const uint8_t*>(a.w[j]);
  const int64_t nblocks = a.k / Q::kBlock, prefetch = a.prefetch;
  __m512 acc[MR * NR];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NR; ++i) acc[i] = _mm512_setzero_ps();
  int64_t b = 0;
  if constexpr (Q::kScales > 0 && MR <= kScaleMaxRows) {
    // The scales are converted to float first and then broadcast from memory
    // by the operations that use them (folded into them: a broadcast into a
    // register takes a shuffle pipe on Zen 4, the pipes the table lookups are
    // bound by). The per-block f16 broadcasts and conversions were the
    // largest part of a Q4_1 tile's vector work at one row after the
    // multiply-adds. Same values, so the same bits.
    //
    // Whole groups of 16 blocks by scales16, a chunk at a time. One core, a
    // Q4_1 [576, 1536] matrix at one row: 47.3 -> 42.6 us with the
    // broadcasts folded (it was one broadcast into a register and one folded
    // into an FMA).
    float sc[NR][Q::kScales][kScaleChunk];
    const int64_t grouped = nblocks / 16 * 16;
    for (; b < grouped; b += kScaleChunk) {
      const int64_t c1 = std::min(grouped, b + kScaleChunk);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j)
        for (int64_t g = b; g < c1; g += 16) Q::scales16(w[j] + g * Q::kBytes, &sc[j][0][g - b], kScaleChunk);
      for (int64_t i = b; i < c1; ++i)
        tile_step<Q, MR, NR, true, kStore>(x, w, prefetch, i, &sc[0][0][i - b], kScaleChunk, acc, dst);
    }
    b = grouped;
    // The blocks after the last whole group (a Q4_1 row of 576 has 18) one at
    // a time, all of a block's scales in one 128-bit conversion: a pass with
    // masked loads over them, or one conversion per scale, took longer.
    for (; b < nblocks; ++b) {
      float own[NR * Q::kScales];  // row j's scale i at own[j * kScales + i]
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) {
        uint32_t h;  // the block's first two f16s (Q4_0, Q8_0: its scale and two weights)
        std::memcpy(&h, w[j] + b * Q::kBytes, 4);
        const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h)));
        if constexpr (Q::kScales == 2) {
          _mm_storel_pi(reinterpret_cast<__m64*>(own + 2 * j), f);
        } else {
          _mm_store_ss(own + j, f);
        }
      }
      tile_step<Q, MR, NR, true, kStore>(x, w, prefetch, b, own, 1, acc, dst);
    }
  } else {
    for (; b < nblocks; ++b) tile_step<Q, MR, NR, false, kStore>(x, w, prefetch, b, nullptr, 0, acc, dst);
  }
  StoreF32::all<MR * NR, NR>(acc, a);
}

template <class Q>
PackedKernels make_kernels() {
  PackedKernels k;
  k.decode_row = &decode_row<Q>;
  k.max_mr = 8;
  k.by_mr[1] = TileKernel{4, &fused_tile<Q, 1, 4>};
  k.by_mr[2] = TileKernel{4, &fused_tile<Q, 2, 4>};
  k.by_mr[3] = TileKernel{4, &fused_tile<Q, 3, 4>};
  k.by_mr[4] = TileKernel{4, &fused_tile<Q, 4, 4>};
  k.by_mr[5] = TileKernel{3, &fused_tile<Q, 5, 3>};
  k.by_mr[6] = TileKernel{3, &fused_tile<Q, 6, 3>};
  k.by_mr[7] = TileKernel{3, &fused_tile<Q, 7, 3>};
  k.by_mr[8] = TileKernel{3, &fused_tile<Q, 8, 3>};
  k.decoding = TileKernel{3, &fused_tile<Q, 8, 3, true>};
  return k;
}

}  // namespace

const PackedKernels* avx512_packed_kernels(PackedType type) {
  return kernels_of<Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K>(
      type, [](auto tag) { return make_kernels<typename decltype(tag)::type>(); });
}

}  // namespace nnsight::kernels::detail

#else  // not x86-64: the path does not exist

namespace nnsight::kernels::detail {
const PackedKernels* avx512_packed_kernels(PackedType) { return nullptr; }
}  // namespace nnsight::kernels::detail

#endif
