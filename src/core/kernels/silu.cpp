#include "core/kernels/silu.h"

#include <dlfcn.h>

#include <algorithm>

#include "core/kernels/cpu_features.h"
#include "core/kernels/cuda_kernels.h"
#include "core/kernels/kernel_gradients.h"
#include "core/kernels/lane_mask.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/undispatched.h"
#include "core/kernels/kernel_path.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NNSIGHT_SILU_AVX512 __attribute__((target("avx512f")))
#define NNSIGHT_SILU_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace nnsight::kernels {

namespace {

#if defined(NNSIGHT_SILU_AVX512)
using Exp16 = __m512 (*)(__m512);

// SLEEF's expf16_u10 where LibTorch loaded it (Debian's LibTorch links the
// shared libsleef); nullptr where it is not visible (a LibTorch with SLEEF
// linked in statically hides it).
Exp16 sleef_exp16() {
  static const Exp16 f = [] {
    if (!cpu_features().avx512) return Exp16(nullptr);
    return reinterpret_cast<Exp16>(dlsym(RTLD_DEFAULT, "Sleef_expf16_u10"));
  }();
  return f;
}

// out[i] = x[i] / (1 + exp(-x[i])) (times up[i] when up is given), for one row of n.
NNSIGHT_SILU_AVX512 void silu_row(Exp16 exp16, const float* x, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_below16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    __m512 s = _mm512_div_ps(v, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), v))));
    if (up != nullptr) s = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, s);
  }
}

// AVX2 machines: SLEEF's expf8_u10, what LibTorch's AVX2 silu calls; row by
// row too, so a row's values do not depend on where it starts in the batch
// (LibTorch vectorizes the flat tensor: a row's tail lanes would).
using Exp8 = __m256 (*)(__m256);
Exp8 sleef_exp8() {
  static const Exp8 f = [] {
    if (!cpu_features().avx2 || cpu_features().avx512) return Exp8(nullptr);
    return reinterpret_cast<Exp8>(dlsym(RTLD_DEFAULT, "Sleef_expf8_u10"));
  }();
  return f;
}

NNSIGHT_SILU_AVX2 void silu_row8(Exp8 exp8, const float* x, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < n; i += 8) {
    const int32_t left = static_cast<int32_t>(std::min<int64_t>(n - i, 8));
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);  // lanes below `left`
    const __m256 v = _mm256_maskload_ps(x + i, m);
    __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
    if (up != nullptr) s = _mm256_mul_ps(s, _mm256_maskload_ps(up + i, m));
    _mm256_maskstore_ps(out + i, m, s);
  }
}

bool own_path(const at::Tensor& x) {
  return (sleef_exp16() != nullptr || sleef_exp8() != nullptr) && cpu_kernels_for(x) && x.scalar_type() == at::kFloat &&
         x.is_contiguous() && x.dim() >= 1 && !records_grad(x);
}

at::Tensor run(const at::Tensor& x, const at::Tensor* up) {
  at::Tensor out = new_output_like(x);
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  const float* xp = x.data_ptr<float>();
  const float* up_p = up != nullptr ? up->data_ptr<float>() : nullptr;
  float* op = out.data_ptr<float>();
  const Exp16 exp16 = sleef_exp16();
  const Exp8 exp8 = sleef_exp8();
  // Rows of a prefill are shared out; a decode step's one row runs here.
  kernels::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* u = up_p != nullptr ? up_p + r * n : nullptr;
      if (exp16 != nullptr)
        silu_row(exp16, xp + r * n, u, op + r * n, n);
      else
        silu_row8(exp8, xp + r * n, u, op + r * n, n);
    }
  });
  return out;
}
#endif

}  // namespace

at::Tensor silu(const at::Tensor& x) {
#if defined(NNSIGHT_SILU_AVX512)
  if (own_path(x)) return run(x, nullptr);
#endif
  return at::silu(x);
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
#if defined(NNSIGHT_SILU_AVX512)
  if (own_path(gate) && own_path(up) && gate.sizes().equals(up.sizes())) return run(gate, &up);
#endif
  if (cuda_kernels_for(gate) && cuda_kernels_for(up) && gate.dim() == 2 && gate.sizes().equals(up.sizes()) &&
      gate.stride(1) == 1 && up.stride(1) == 1 && gate.scalar_type() == up.scalar_type())
    return cuda::silu_mul(gate, up);
  return at::silu(gate) * up;
}

}  // namespace nnsight::kernels
