#include "runner/sampling/greedy.h"

#include <cmath>

#include "core/kernels/cpu_features.h"
#include "core/kernels/lane_mask.h"

#if defined(__x86_64__) && defined(__GNUC__)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593 (_mm512_reduce_max_ps)
#endif
#include <immintrin.h>
#define NNSIGHT_GREEDY_AVX512 __attribute__((target("avx512f")))
#endif

namespace nnsight::runner {

namespace {

#if defined(NNSIGHT_GREEDY_AVX512)
NNSIGHT_GREEDY_AVX512 int64_t argmax_row(const float* p, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = kernels::lanes_below16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, p + i);
    nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
    mx = _mm512_mask_max_ps(mx, m, mx, v);
  }
  // The first element equal to the maximum (equal compares +0 and -0 alike,
  // as argmax's ordering does), or the first NaN.
  const float best = _mm512_reduce_max_ps(mx);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = kernels::lanes_below16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, p + i);
    const __mmask16 hit = nan != 0 ? _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q)
                                   : _mm512_mask_cmp_ps_mask(m, v, _mm512_set1_ps(best), _CMP_EQ_OQ);
    if (hit != 0) return i + __builtin_ctz(hit);
  }
  return 0;  // n == 0 is not called; all -inf rows match best above
}
#endif

}  // namespace

at::Tensor greedy_tokens(const at::Tensor& logits) {
  TORCH_CHECK(logits.dim() == 2, "greedy_tokens: expected [rows, vocab] logits");
#if defined(NNSIGHT_GREEDY_AVX512)
  if (kernels::cpu_features().avx512 && logits.device().is_cpu() && logits.scalar_type() == at::kFloat &&
      logits.is_contiguous() && logits.size(1) > 0) {
    const int64_t rows = logits.size(0), n = logits.size(1);
    at::Tensor out = at::empty({rows}, at::kLong);
    int64_t* tok = out.data_ptr<int64_t>();
    const float* p = logits.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) tok[r] = argmax_row(p + r * n, n);
    return out;
  }
#endif
  return logits.argmax(1);
}

}  // namespace nnsight::runner
