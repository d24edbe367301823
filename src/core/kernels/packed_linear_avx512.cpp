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

// 16 bytes -> 16 x int32 (zero-extended).
NNSIGHT_AVX512_INLINE __m512i bytes16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Each type: kBlock elements in kBytes bytes, decoded in kGroups groups of 32
// elements (two 16-lane chunks, in k order). load() reads a block's scales;
// group() yields its g-th 32 weights. A type whose block starts with kScales
// > 0 f16 scales also has scales16(), converting those of 16 blocks to float,
// and a load() that takes them so converted (the fused tile's scale pass,
// fused_tile below).

struct Q4_0 {
  static constexpr int kBlock = 32, kBytes = 18, kGroups = 1, kScales = 1;
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
    s.table = _mm512_mul_ps(_mm512_set1_ps(sc[0]), iota_ps(-8.f));
    s.qs = b + 2;
  }
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512& w0, __m512& w1) {
    const __m512i z = bytes16(s.qs);  // vpermps reads the low 4 bits: the low nibble
    w0 = _mm512_permutexvar_ps(z, s.table);
    w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(z, 4), s.table);
  }
};

struct Q4_1 {
  static constexpr int kBlock = 32, kBytes = 20, kGroups = 1, kScales = 2;
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
    s.table = _mm512_fmadd_ps(_mm512_set1_ps(sc[0]), iota_ps(0.f), _mm512_set1_ps(sc[stride]));
    s.qs = b + 4;
  }
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512& w0, __m512& w1) {
    const __m512i z = bytes16(s.qs);
    w0 = _mm512_permutexvar_ps(z, s.table);
    w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(z, 4), s.table);
  }
};

// 5-bit types: two 16-entry tables; the fifth bit (a mask bit per lane)
// picks the upper one. No scale pass (kScales = 0): with it a decode step's
// Q5_0 matmuls ran 5-15 % slower at one row (these tiles are bound by their
// four permutes per block, which the pass's permutes add to).
template <bool kHasMin>
struct Q5_01 {
  static constexpr int kBlock = 32, kBytes = kHasMin ? 24 : 22, kGroups = 1, kScales = 0;
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
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512& w0, __m512& w1) {
    const __m512i z0 = bytes16(s.qs), z1 = _mm512_srli_epi32(z0, 4);
    w0 = _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(z0, s.lo), static_cast<__mmask16>(s.qh), z0, s.hi);
    w1 = _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(z1, s.lo), static_cast<__mmask16>(s.qh >> 16), z1, s.hi);
  }
};
using Q5_0 = Q5_01<false>;
using Q5_1 = Q5_01<true>;

struct Q8_0 {
  static constexpr int kBlock = 32, kBytes = 34, kGroups = 1, kScales = 1;
  struct State {
    __m512 d;
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
    s.d = _mm512_set1_ps(sc[0]);
    s.qs = reinterpret_cast<const int8_t*>(b + 2);
  }
  NNSIGHT_AVX512_INLINE static void group(const State& s, int, __m512& w0, __m512& w1) {
    const __m128i* p = reinterpret_cast<const __m128i*>(s.qs);
    w0 = _mm512_mul_ps(s.d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p))));
    w1 = _mm512_mul_ps(s.d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p + 1))));
  }
};

// Q4_K / Q5_K: eight sub-blocks of 32, each with its (d * scale, dmin * min).
template <bool kFive>
struct QK45 {
  static constexpr int kBlock = 256, kBytes = kFive ? 176 : 144, kGroups = 8, kScales = 0;
  struct State {
    float d[8], m[8];
    const uint8_t* qh;  // Q5_K only
    const uint8_t* qs;
  };
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    const float d = half_to_float(b), dmin = half_to_float(b + 2);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      k_scale_min(b + 4, j, &sc, &mn);
      s.d[j] = d * static_cast<float>(sc);
      s.m[j] = dmin * static_cast<float>(mn);
    }
    s.qh = b + 16;
    s.qs = b + (kFive ? 48 : 16);
  }
  // Sub-block g: bytes 32 * (g / 2) .. + 32, low nibbles for even g, high for odd.
  NNSIGHT_AVX512_INLINE static void group(const State& s, int g, __m512& w0, __m512& w1) {
    const uint8_t* p = s.qs + 32 * (g / 2);
    __m512i z0 = bytes16(p), z1 = bytes16(p + 16);
    if (g & 1) {
      z0 = _mm512_srli_epi32(z0, 4);
      z1 = _mm512_srli_epi32(z1, 4);
    }
    // (d * scale) * q is exact (11 x 6 x 5 bits): the FMA rounds as
    // multiply-then-subtract does.
    const __m512 d = _mm512_set1_ps(s.d[g]), m = _mm512_set1_ps(s.m[g]);
    const __m512 lo = _mm512_fmsub_ps(d, iota_ps(0.f), m);
    w0 = _mm512_permutexvar_ps(z0, lo);
    w1 = _mm512_permutexvar_ps(z1, lo);
    if constexpr (kFive) {
      const __m512 hi = _mm512_fmsub_ps(d, iota_ps(16.f), m);
      const __mmask32 bit = _mm256_test_epi8_mask(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.qh)),
                                                  _mm256_set1_epi8(static_cast<char>(1 << g)));
      w0 = _mm512_mask_permutexvar_ps(w0, static_cast<__mmask16>(bit), z0, hi);
      w1 = _mm512_mask_permutexvar_ps(w1, static_cast<__mmask16>(bit >> 16), z1, hi);
    }
  }
};
using Q4_K = QK45<false>;
using Q5_K = QK45<true>;

struct Q6_K {
  static constexpr int kBlock = 256, kBytes = 210, kGroups = 8, kScales = 0;
  struct State {
    float ds[16];  // d * scale, one per 16 elements
    const uint8_t* b;
  };
  NNSIGHT_AVX512_INLINE static void load(const uint8_t* b, State& s) {
    const float d = half_to_float(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int j = 0; j < 16; ++j) s.ds[j] = d * static_cast<float>(sc[j]);
    s.b = b;
  }
  // Group g: half g / 4, quarter q = g % 4: nibble (q / 2 ? high : low) of
  // ql[half * 64 + (q % 2) * 32 + l], bits 2q..2q+1 of qh[half * 32 + l].
  NNSIGHT_AVX512_INLINE static void group(const State& s, int g, __m512& w0, __m512& w1) {
    const int half = g / 4, q = g % 4;
    const uint8_t* ql = s.b + 64 * half + 32 * (q % 2);
    const uint8_t* qh = s.b + 128 + 32 * half;
    const __m512i low4 = _mm512_set1_epi32(0x0F), two = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(32);
    __m512i v[2];
    for (int c = 0; c < 2; ++c) {
      __m512i l = bytes16(ql + 16 * c);
      if (q >= 2) l = _mm512_srli_epi32(l, 4);
      const __m512i h = _mm512_and_si512(_mm512_srli_epi32(bytes16(qh + 16 * c), 2 * q), two);
      v[c] = _mm512_sub_epi32(_mm512_or_si512(_mm512_and_si512(l, low4), _mm512_slli_epi32(h, 4)), bias);
    }
    w0 = _mm512_mul_ps(_mm512_set1_ps(s.ds[8 * half + 2 * q]), _mm512_cvtepi32_ps(v[0]));
    w1 = _mm512_mul_ps(_mm512_set1_ps(s.ds[8 * half + 2 * q + 1]), _mm512_cvtepi32_ps(v[1]));
  }
};

template <class Q>
NNSIGHT_PACKED_TARGET void decode_row(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / Q::kBlock; ++b) {
    typename Q::State s;
    Q::load(src + b * Q::kBytes, s);
#pragma GCC unroll 8
    for (int g = 0; g < Q::kGroups; ++g) {
      __m512 w0, w1;
      Q::group(s, g, w0, w1);
      float* y = dst + b * Q::kBlock + 32 * g;
      _mm512_storeu_ps(y, w0);
      _mm512_storeu_ps(y + 16, w1);
    }
  }
}

// One block of the fused tile: every x row times the block's weights of every w row.
template <class Q, int MR, int NR>
NNSIGHT_AVX512_INLINE void tile_block(const float* const* x, const typename Q::State* s, int64_t b, __m512* acc) {
#pragma GCC unroll 8
  for (int g = 0; g < Q::kGroups; ++g) {
    const int64_t k = b * Q::kBlock + 32 * g;
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      __m512 w0, w1;
      Q::group(s[j], g, w0, w1);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        acc[i * NR + j] = _mm512_fmadd_ps(_mm512_loadu_ps(x[i] + k), w0, acc[i * NR + j]);
        acc[i * NR + j] = _mm512_fmadd_ps(_mm512_loadu_ps(x[i] + k + 16), w1, acc[i * NR + j]);
      }
    }
  }
}

// Block b of every w row times every x row; the rows' scales are converted
// by Q::load, or taken from sc (row j's scale i at sc[(j * kScales + i) * stride]).
template <class Q, int MR, int NR>
NNSIGHT_AVX512_INLINE void tile_step(const float* const* x, const uint8_t* const* w, int64_t prefetch, int64_t b,
                                     const float* sc, int64_t stride, __m512* acc) {
  typename Q::State s[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) {
    const uint8_t* blk = w[j] + b * Q::kBytes;
    if (prefetch != 0) _mm_prefetch(reinterpret_cast<const char*>(blk) + prefetch, _MM_HINT_T0);
    if constexpr (Q::kScales > 0) {
      if (sc != nullptr) {
        Q::load(blk, sc + j * Q::kScales * stride, stride, s[j]);
        continue;
      }
    }
    Q::load(blk, s[j]);
  }
  tile_block<Q, MR, NR>(x, s, b, acc);
}

// Blocks whose scales the tile converts beforehand, this many blocks of
// every w row at a time (a multiple of 16).
constexpr int64_t kScaleChunk = 64;
// Up to this many x rows; with more, a block's scales are shared by enough
// rows that converting them in the loop does not show.
constexpr int kScaleMaxRows = 4;

template <class Q, int MR, int NR>
NNSIGHT_PACKED_TARGET void fused_tile(const TileArgs& a) {
  const float* x[MR];
  const uint8_t* w[NR];
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
    // Whole groups of 16 blocks have their scales converted first, a chunk at
    // a time, and then broadcast from memory (a load, not a shuffle): the
    // per-block f16 broadcasts and conversions were the largest part of a
    // Q4_1 tile's vector work at one row after the multiply-adds. Same values,
    // so the same bits. The blocks after the last whole group (a Q4_1 row of
    // 576 has 18) convert their own.
    float sc[NR][Q::kScales][kScaleChunk];
    const int64_t grouped = nblocks / 16 * 16;
    for (; b < grouped; b += kScaleChunk) {
      const int64_t c1 = std::min(grouped, b + kScaleChunk);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j)
        for (int64_t g = b; g < c1; g += 16) Q::scales16(w[j] + g * Q::kBytes, &sc[j][0][g - b], kScaleChunk);
      for (int64_t i = b; i < c1; ++i) tile_step<Q, MR, NR>(x, w, prefetch, i, &sc[0][0][i - b], kScaleChunk, acc);
    }
    b = grouped;
  }
  for (; b < nblocks; ++b) tile_step<Q, MR, NR>(x, w, prefetch, b, nullptr, 0, acc);
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
  return k;
}

}  // namespace

const PackedKernels* avx512_packed_kernels(PackedType type) {
  static const PackedKernels q4_0 = make_kernels<Q4_0>(), q4_1 = make_kernels<Q4_1>(), q5_0 = make_kernels<Q5_0>(),
                             q5_1 = make_kernels<Q5_1>(), q8_0 = make_kernels<Q8_0>(), q4_k = make_kernels<Q4_K>(),
                             q5_k = make_kernels<Q5_K>(), q6_k = make_kernels<Q6_K>();
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

}  // namespace nnsight::kernels::detail

#else  // not x86-64: the path does not exist

namespace nnsight::kernels::detail {
const PackedKernels* avx512_packed_kernels(PackedType) { return nullptr; }
}  // namespace nnsight::kernels::detail

#endif
