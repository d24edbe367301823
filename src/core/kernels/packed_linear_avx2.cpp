// AVX2 kernels for packed (block-quantized) weights, for x86-64 CPUs without
// AVX-512 (Zen 2 / Zen 3, Intel client cores before and after AVX-512): a
// row decoder per type and fused register tiles that decode the weights in
// registers and multiply them with float32 activations (see packed_linear.h).
//
// Exactness: every weight is computed with the reference decoder's float
// operations (packed_decode.cpp). Where the reference multiplies and then adds
// (Q4_1, Q5_1, Q4_K, Q5_K), the product of a scale and a small integer is
// exact in float, so one FMA rounds as the multiply-then-add does. The tiles
// accumulate exactly as kernels::linear's AVX2 tiles (linear_tiles_avx2.cpp):
// one 8-lane accumulator per output element, lane l summing k = l, l + 8, ...
// in increasing k with one FMA each, then the shared tree (linear_store_avx2.h).
// So the result is bitwise the AVX2 float32 kernel's on the dequantized
// matrix, for any number of rows and any thread split.
//
// Unlike the AVX-512 tiles, which look a 4-bit value up in a 16-entry table
// of floats per block (vpermps), these convert the integer and scale it: an
// AVX2 permute holds 8 floats, so a 16-entry lookup would be two permutes and
// a blend per 8 weights against a conversion and an FMA.
#include "core/kernels/packed_linear_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include <algorithm>

#include "core/kernels/linear_store_avx2.h"
#include "core/kernels/packed_decode.h"
#include "core/kernels/packed_kscales.h"

// F16C converts the f16 scales (every AVX2 CPU has it): exact like
// half_to_float (a signalling NaN scale comes out quieted: NaN weights either way).
#define NNSIGHT_PACKED2_TARGET __attribute__((target("avx2,fma,f16c")))
#define NNSIGHT_AVX2_INLINE NNSIGHT_PACKED2_TARGET inline __attribute__((always_inline))

namespace nnsight::kernels::detail {

namespace {

NNSIGHT_AVX2_INLINE float half(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

NNSIGHT_AVX2_INLINE __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Bytes 0-7 / 8-15 of v, zero- or sign-extended to 8 x int32, as float.
NNSIGHT_AVX2_INLINE __m256 low8_u(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }
NNSIGHT_AVX2_INLINE __m256 high8_u(__m128i v) { return low8_u(_mm_unpackhi_epi64(v, v)); }
NNSIGHT_AVX2_INLINE __m256 low8_s(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
NNSIGHT_AVX2_INLINE __m256 high8_s(__m128i v) { return low8_s(_mm_unpackhi_epi64(v, v)); }

// 8 bytes at p widened to 8 x int32 (zero- / sign-extended), the load folded
// into the widening.
NNSIGHT_AVX2_INLINE __m256i widen_u8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
NNSIGHT_AVX2_INLINE __m256i widen_s8(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// The float at p in all 8 lanes, broadcast by the load itself: the scales are
// converted once per block and stored, so that the tile's vector pipes do not
// also broadcast them (a register broadcast is a shuffle, as the widenings
// are). Written in asm because GCC would keep the value in a register.
NNSIGHT_AVX2_INLINE __m256 broadcast(const float* p) {
  __m256 r;
  asm("vbroadcastss %1, %0" : "=x"(r) : "m"(*p));
  return r;
}

// The first two f16 at p, converted together (one conversion for a block's
// d and m).
NNSIGHT_AVX2_INLINE void halves2(const uint8_t* p, float* out) {
  uint32_t h;
  std::memcpy(&h, p, 4);
  _mm_storel_pi(reinterpret_cast<__m64*>(out), _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h))));
}

// The low and the high nibbles of 16 bytes, one per byte.
NNSIGHT_AVX2_INLINE __m128i low_nibbles(__m128i q) { return _mm_and_si128(q, _mm_set1_epi8(0x0F)); }
NNSIGHT_AVX2_INLINE __m128i high_nibbles(__m128i q) { return _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F)); }

// Bits j0 .. j0 + 15 of qh as bytes of 16 (bit set) or 0, in order.
NNSIGHT_AVX2_INLINE __m128i fifth_bits(uint32_t qh, int j0) {
  const __m128i bytes = _mm_set1_epi16(static_cast<short>((qh >> j0) & 0xFFFF));
  // Byte i looks at bit i % 8 of byte i / 8 of the 16 bits.
  const __m128i spread = _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(spread, bit), bit), _mm_set1_epi8(16));
}

// Each type: kBlock elements in kBytes bytes; load() reads a block's scales,
// group(s, g, w) yields its g-th 32 weights in k order as w[0..3] (8 each).

// Q4_0 / Q4_1: bytes 0-7 of the nibbles hold elements 0-7 (low nibbles) and
// 16-23 (high), bytes 8-15 elements 8-15 and 24-31: each half widened once
// from memory, the nibbles then split in 32-bit lanes.
// Q4_0 and Q8_0: a block is one f16 scale, then its values.
struct ScaleFirst {
  static constexpr int kBlock = 32;
  struct State {
    float d[2];  // the scale (and the next f16, unused)
    const uint8_t* qs;
  };
  NNSIGHT_AVX2_INLINE static void load(const uint8_t* b, State& s) {
    halves2(b, s.d);
    s.qs = b + 2;
  }
};

struct Q4_0 : ScaleFirst {
  static constexpr int kBytes = 18;
  // d * (nibble - 8), the subtraction in integers as the reference's.
  NNSIGHT_AVX2_INLINE static void group(const State& s, int, __m256* w) {
    const __m256 d = broadcast(s.d);
    const __m256i mask = _mm256_set1_epi32(0x0F), eight = _mm256_set1_epi32(8);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = widen_u8(s.qs + 8 * h);
      w[h] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(q, mask), eight)));
      w[2 + h] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(q, 4), eight)));
    }
  }
};

struct Q4_1 {
  static constexpr int kBlock = 32, kBytes = 20;
  struct State {
    float dm[2];  // d, m
    const uint8_t* qs;
  };
  NNSIGHT_AVX2_INLINE static void load(const uint8_t* b, State& s) {
    halves2(b, s.dm);
    s.qs = b + 4;
  }
  // d * nibble + m: d * nibble is exact (11 x 4 bits), so the FMA rounds as
  // the reference's multiply-then-add.
  NNSIGHT_AVX2_INLINE static void group(const State& s, int, __m256* w) {
    const __m256 d = broadcast(s.dm), m = broadcast(s.dm + 1);
    const __m256i mask = _mm256_set1_epi32(0x0F);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = widen_u8(s.qs + 8 * h);
      w[h] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(q, mask)), m);
      w[2 + h] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4)), m);
    }
  }
};

// Q5_0 (d * (q5 - 16)) and Q5_1 (d * q5 + m, d * q5 exact: 11 x 5 bits).
template <bool kHasMin>
struct Q5_01 {
  static constexpr int kBlock = 32, kBytes = kHasMin ? 24 : 22;
  struct State {
    __m256 d, m;
    uint32_t qh;
    const uint8_t* qs;
  };
  NNSIGHT_AVX2_INLINE static void load(const uint8_t* b, State& s) {
    s.d = _mm256_set1_ps(half(b));
    if constexpr (kHasMin) {
      s.m = _mm256_set1_ps(half(b + 2));
      std::memcpy(&s.qh, b + 4, 4);
      s.qs = b + 8;
    } else {
      std::memcpy(&s.qh, b + 2, 4);
      s.qs = b + 6;
    }
  }
  NNSIGHT_AVX2_INLINE static __m256 scale(const State& s, __m256 q) {
    if constexpr (kHasMin) return _mm256_fmadd_ps(s.d, q, s.m);
    return _mm256_mul_ps(s.d, q);
  }
  NNSIGHT_AVX2_INLINE static void group(const State& s, int, __m256* w) {
    const __m128i q = load16(s.qs);
    __m128i lo = _mm_or_si128(low_nibbles(q), fifth_bits(s.qh, 0));
    __m128i hi = _mm_or_si128(high_nibbles(q), fifth_bits(s.qh, 16));
    if constexpr (kHasMin) {
      w[0] = scale(s, low8_u(lo));
      w[1] = scale(s, high8_u(lo));
      w[2] = scale(s, low8_u(hi));
      w[3] = scale(s, high8_u(hi));
    } else {
      const __m128i sixteen = _mm_set1_epi8(16);
      lo = _mm_sub_epi8(lo, sixteen);
      hi = _mm_sub_epi8(hi, sixteen);
      w[0] = scale(s, low8_s(lo));
      w[1] = scale(s, high8_s(lo));
      w[2] = scale(s, low8_s(hi));
      w[3] = scale(s, high8_s(hi));
    }
  }
};
using Q5_0 = Q5_01<false>;
using Q5_1 = Q5_01<true>;

struct Q8_0 : ScaleFirst {
  static constexpr int kBytes = 34;
  NNSIGHT_AVX2_INLINE static void group(const State& s, int, __m256* w) {
    const __m256 d = broadcast(s.d);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) w[c] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(widen_s8(s.qs + 8 * c)));
  }
};

// Q4_K / Q5_K: eight sub-blocks of 32 with (d * scale, dmin * min) each;
// sub-blocks 2g and 2g + 1 are the low and the high nibbles of the same 32
// bytes. (d * scale) * q is exact (11 x 6 x 5 bits), so one FMA rounds as the
// reference's multiply-then-subtract.
template <bool kFive>
struct QK45 {
  static constexpr int kBlock = 256, kBytes = kFive ? 176 : 144;
  struct State {
    alignas(32) float d[8];
    alignas(32) float m[8];
    const uint8_t* qh;  // Q5_K only
    const uint8_t* qs;
  };
  NNSIGHT_AVX2_INLINE static void load(const uint8_t* b, State& s) {
    k_scales(b, s.d, s.m);
    s.qh = b + 16;
    s.qs = b + (kFive ? 48 : 16);
  }
  NNSIGHT_AVX2_INLINE static void group(const State& s, int sub, __m256* w) {
    const uint8_t* p = s.qs + 32 * (sub / 2);
    const __m256 d = broadcast(&s.d[sub]), m = broadcast(&s.m[sub]);
    const __m256i mask = _mm256_set1_epi32(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = widen_u8(p + 8 * c);
      __m256i v = sub % 2 == 0 ? _mm256_and_si256(q, mask) : _mm256_srli_epi32(q, 4);
      if constexpr (kFive) {
        // Bit `sub` of qh[l] is element l's fifth bit: moved to bit 4.
        const __m256i hb = _mm256_srli_epi32(widen_u8(s.qh + 8 * c), sub);
        v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_and_si256(hb, _mm256_set1_epi32(1)), 4));
      }
      w[c] = _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(v), m);
    }
  }
};
using Q4_K = QK45<false>;
using Q5_K = QK45<true>;

// Q6_K: halves of 128, each four quarters of 32; element l of quarter q of
// half h is nibble (q / 2 ? high : low) of ql[64 h + 32 (q % 2) + l] with bits
// 2q..2q+1 of qh[32 h + l] above it, minus 32, times (d * scale[8 h + 2 q + l / 16]).
struct Q6_K {
  static constexpr int kBlock = 256, kBytes = 210;
  struct State {
    float ds[16];  // d * scale
    const uint8_t* b;
  };
  NNSIGHT_AVX2_INLINE static void load(const uint8_t* b, State& s) {
    const float d = half(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int i = 0; i < 16; ++i) s.ds[i] = d * static_cast<float>(sc[i]);
    s.b = b;
  }
  NNSIGHT_AVX2_INLINE static void group(const State& s, int g, __m256* w) {
    const int h = g / 4, q = g % 4;
    const __m128i* ql = reinterpret_cast<const __m128i*>(s.b + 64 * h + 32 * (q % 2));
    const __m128i* qh = reinterpret_cast<const __m128i*>(s.b + 128 + 32 * h);
    const __m128i two = _mm_set1_epi8(0x30), bias = _mm_set1_epi8(32);
#pragma GCC unroll 2
    for (int part = 0; part < 2; ++part) {
      const __m128i l = _mm_loadu_si128(ql + part);
      const __m128i nib = q / 2 == 0 ? low_nibbles(l) : high_nibbles(l);
      // Bits 2q..2q+1 to bits 4..5 (16-bit shifts; the mask drops what crossed bytes).
      const __m128i hb = _mm_loadu_si128(qh + part);
      const __m128i top = 2 * q >= 4 ? _mm_srli_epi16(hb, 2 * q - 4) : _mm_slli_epi16(hb, 4 - 2 * q);
      const __m128i v = _mm_sub_epi8(_mm_or_si128(nib, _mm_and_si128(top, two)), bias);
      const __m256 d = broadcast(&s.ds[8 * h + 2 * q + part]);
      w[2 * part] = _mm256_mul_ps(d, low8_s(v));
      w[2 * part + 1] = _mm256_mul_ps(d, high8_s(v));
    }
  }
};

template <class Q>
NNSIGHT_PACKED2_TARGET void decode_row(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / Q::kBlock; ++b) {
    typename Q::State s;
    Q::load(src + b * Q::kBytes, s);
    for (int g = 0; g < Q::kBlock / 32; ++g) {
      __m256 w[4];
      Q::group(s, g, w);
      float* y = dst + b * Q::kBlock + 32 * g;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(y + 8 * c, w[c]);
    }
  }
}

// mr rows of x against nr rows of packed w, decoded 32 weights of one w row
// at a time.
template <class Q, int MR, int NR>
NNSIGHT_PACKED2_TARGET void fused_tile(const TileArgs& a) {
  const float* x[MR];
  const uint8_t* w[NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) x[i] = static_cast<const float*>(a.x[i]);
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const uint8_t*>(a.w[j]);
  const int64_t nblocks = a.k / Q::kBlock, prefetch = a.prefetch;
  __m256 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblocks; ++b) {
    typename Q::State s[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const uint8_t* blk = w[j] + b * Q::kBytes;
      if (prefetch != 0) {
#pragma GCC unroll 4
        for (int off = 0; off < Q::kBytes; off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(blk) + prefetch + off, _MM_HINT_T0);
      }
      Q::load(blk, s[j]);
    }
#pragma GCC unroll 8
    for (int g = 0; g < Q::kBlock / 32; ++g) {
      const int64_t k = b * Q::kBlock + 32 * g;
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) {
        __m256 wv[4];
        Q::group(s[j], g, wv);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x[i] + k + 8 * c), wv[c], acc[i][j]);
      }
    }
  }
  float sums[MR * NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) sums[i * NR + j] = avx2::hsum8(acc[i][j]);
  store_sums<float>(a, MR, NR, sums);
}

template <class Q>
PackedKernels make_kernels() {
  PackedKernels k;
  k.decode_row = &decode_row<Q>;
  // As the AVX2 float32 tiles: accumulators and decoded vectors within the 16 registers.
  k.max_mr = 4;
  k.by_mr[1] = TileKernel{4, &fused_tile<Q, 1, 4>};
  k.by_mr[2] = TileKernel{4, &fused_tile<Q, 2, 4>};
  k.by_mr[3] = TileKernel{3, &fused_tile<Q, 3, 3>};
  k.by_mr[4] = TileKernel{3, &fused_tile<Q, 4, 3>};
  return k;
}

}  // namespace

const PackedKernels* avx2_packed_kernels(PackedType type) {
  return kernels_of<Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K>(
      type, [](auto tag) { return make_kernels<typename decltype(tag)::type>(); });
}

}  // namespace nnsight::kernels::detail

#else  // not x86-64: the path does not exist

namespace nnsight::kernels::detail {
const PackedKernels* avx2_packed_kernels(PackedType) { return nullptr; }
}  // namespace nnsight::kernels::detail

#endif
