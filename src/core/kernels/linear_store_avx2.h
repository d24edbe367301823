// The horizontal add that ends every AVX2 tile of a float32 dot product
// (kernels::linear's AVX2 tiles and the packed AVX2 tiles): the 8 lanes added
// by the tree l + 4, + 2, + 1. Shared so that both reduce in the same order,
// which is what makes the packed tiles' sums bitwise the float32 tiles'.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

namespace nnsight::kernels::detail::avx2 {

__attribute__((target("avx2,fma"))) inline float hsum8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

}  // namespace nnsight::kernels::detail::avx2

#endif
