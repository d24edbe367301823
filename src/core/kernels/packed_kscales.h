// The scales and mins of a Q4_K / Q5_K super-block, for the AVX2 and AVX-512
// packed kernels (packed_linear_avx2.cpp, packed_linear_avx512.cpp) and the
// 8-bit-activation ones (packed_linear_q8_avx2.cpp). Internal to src/core/kernels.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include <cstdint>

#include "core/kernels/packed_decode.h"

namespace nnsight::kernels::detail {

// The 6-bit scales and mins of a Q4_K / Q5_K super-block (k_scale_min's
// packing of 12 bytes at b + 4) widened together rather than one by one:
// bytes 0-7 the eight scales, bytes 8-15 the eight mins.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m128i k_scales_mins_u8(const uint8_t* b) {
  // Bytes 4..19 of the block: the 12 scale bytes, then 4 of the next field (unused).
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));
  // a: scale 0-3 from bytes 0-3, scale 4-7 low bits from bytes 8-11, min 0-3
  // from bytes 4-7, min 4-7 low bits from the high nibbles of bytes 8-11;
  // t: the two high bits of scale / min 4-7 from the top of bytes 0-3 / 4-7.
  const __m128i a = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i t = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i low = _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i high_nibble =
      _mm_and_si128(_mm_srli_epi16(a, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  const __m128i top = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(t, 6), _mm_set1_epi8(3)), 4);
  return _mm_or_si128(_mm_or_si128(low, high_nibble), top);  // scales 0-7, mins 0-7
}

// The eight (d * scale, dmin * min) pairs: the same float products as the
// reference decoder's. d and m: 8 floats each, 32-byte aligned.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void k_scales(const uint8_t* b, float* d, float* m) {
  const __m128i sm = k_scales_mins_u8(b);
  const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm));
  const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8)));
  _mm256_store_ps(d, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(load_u16(b))), sc));
  _mm256_store_ps(m, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(load_u16(b + 2))), mn));
}

}  // namespace nnsight::kernels::detail

#endif
