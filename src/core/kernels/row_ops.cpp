#include "core/kernels/row_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/kernels/cpu_features.h"
#include "core/kernels/lane_mask.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593 (see linear_tiles_avx512.cpp)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define NNSIGHT_ROW_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define NNSIGHT_ROW_AVX2 __attribute__((target("avx2,fma")))
#include "core/kernels/linear_store_avx512.h"
#if defined(NNSIGHT_HAVE_LIBMVEC)
// glibc libmvec's 16-lane expf (the vector ABI name of expf for AVX-512).
extern "C" NNSIGHT_ROW_AVX512 __m512 _ZGVeN16v_expf(__m512);
#endif
#endif

namespace nnsight::kernels {

namespace {

using DotFn = void (*)(const float*, const void* const*, int64_t, int64_t, float*);
using AxpyFn = void (*)(const float*, const void* const*, int64_t, int64_t, float*);
using ExpSumFn = float (*)(float*, int64_t, float*);

// ---- softmax numerators: std::exp one by one, summed in order j = 0, 1, ...

float exp_sum_portable(float* s, int64_t n, float* max_out) {
  const float mx = *std::max_element(s, s + n);
  *max_out = mx;
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  return sum;
}

// ---- portable: dot products in 8 partial sums (x = p mod 8), tree (p, p+4), (p, p+2), (p, p+1)

inline float widen(float v) { return v; }
inline float widen(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <typename T>
void dot_portable(const float* q, const void* const* rows, int64_t n, int64_t d, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const T* r = static_cast<const T*>(rows[j]);
    float p[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int64_t x = 0; x < d; ++x) p[x % 8] += q[x] * widen(r[x]);
    out[j] = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
  }
}

template <typename T>
void axpy_portable(const float* w, const void* const* rows, int64_t n, int64_t d, float* acc) {
  for (int64_t j = 0; j < n; ++j) {
    const T* r = static_cast<const T*>(rows[j]);
    for (int64_t x = 0; x < d; ++x) acc[x] += w[j] * widen(r[x]);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)

// ---- AVX2: 8 lanes (x = l mod 8), one FMA per 8 elements, tree (l, l+4), (l, l+2), (l, l+1)

NNSIGHT_ROW_AVX2 inline __m256i lanes_below(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <typename T>
NNSIGHT_ROW_AVX2 inline __m256 load8(const T* p, int64_t n) {  // n in [1, 8]; zeros past n
  if constexpr (sizeof(T) == 4) {
    return n == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes_below(n));
  } else {
    __m128i h;
    if (n == 8) {
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    } else {
      uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

NNSIGHT_ROW_AVX2 inline float hsum8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

template <typename T>
NNSIGHT_ROW_AVX2 void dot_avx2(const float* q, const void* const* rows, int64_t n, int64_t d, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const T* r = static_cast<const T*>(rows[j]);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t x = 0; x < d; x += 8) {
      const int64_t m = d - x < 8 ? d - x : 8;
      const __m256 qv = m == 8 ? _mm256_loadu_ps(q + x) : _mm256_maskload_ps(q + x, lanes_below(m));
      acc = _mm256_fmadd_ps(qv, load8(r + x, m), acc);
    }
    out[j] = hsum8(acc);
  }
}

template <typename T>
NNSIGHT_ROW_AVX2 void axpy_avx2(const float* w, const void* const* rows, int64_t n, int64_t d, float* acc) {
  for (int64_t x = 0; x < d; x += 8) {
    const int64_t m = d - x < 8 ? d - x : 8;
    const __m256i mask = lanes_below(m);
    __m256 a = _mm256_maskload_ps(acc + x, mask);
    for (int64_t j = 0; j < n; ++j)
      a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8(static_cast<const T*>(rows[j]) + x, m), a);
    _mm256_maskstore_ps(acc + x, mask, a);
  }
}

// ---- AVX-512: 16 lanes (x = l mod 16), one FMA per 16 elements, tree (l, l+8), (l, l+4), (l, l+2), (l, l+1)

template <typename T>
NNSIGHT_ROW_AVX512 inline __m512 load16(const T* p, __mmask16 m) {
  if constexpr (sizeof(T) == 4) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
}

NNSIGHT_ROW_AVX512 inline float hsum16(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

NNSIGHT_ROW_AVX512 inline __mmask16 mask_below(int64_t n) { return lanes_below16(n); }

// Four rows at a time: four independent FMA chains instead of one whose
// latency bound the loop (a decode step's attention spent most of its time
// waiting on it). Each row's own operations and their order are unchanged.
template <typename T>
NNSIGHT_ROW_AVX512 void dot_avx512(const float* q, const void* const* rows, int64_t n, int64_t d, float* out) {
  int64_t j = 0;
  // Sixteen rows at a time, reduced together by the linear kernel's tree,
  // which pairs lanes exactly as hsum16 does: the same sums, with one
  // reduction per 16 rows instead of one per row (one core's attention for a
  // decode step of the default model at 150 keys: 514 -> 491 us).
  for (; j + 16 <= n; j += 16) {
    __m512 a[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_setzero_ps();
    for (int64_t x = 0; x < d; x += 16) {
      const __mmask16 m = mask_below(d - x);
      const __m512 qx = _mm512_maskz_loadu_ps(m, q + x);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(qx, load16(static_cast<const T*>(rows[j + i]) + x, m), a[i]);
    }
    // The pass's lane order is a 4 x 4 transpose of the rows' (its own
    // inverse), so row r's sum is in lane accumulator_of_lane(0, r).
    static constexpr std::array<int32_t, 16> order = [] {
      std::array<int32_t, 16> o{};
      for (int r = 0; r < 16; ++r) o[static_cast<size_t>(r)] = detail::avx512::accumulator_of_lane(0, r);
      return o;
    }();
    _mm512_storeu_ps(
        out + j, _mm512_permutexvar_ps(_mm512_loadu_si512(order.data()), detail::avx512::reduce_pass<16, 0, 16>(a)));
  }
  for (; j + 4 <= n; j += 4) {
    const T* r0 = static_cast<const T*>(rows[j]);
    const T* r1 = static_cast<const T*>(rows[j + 1]);
    const T* r2 = static_cast<const T*>(rows[j + 2]);
    const T* r3 = static_cast<const T*>(rows[j + 3]);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t x = 0; x < d; x += 16) {
      const __mmask16 m = mask_below(d - x);
      const __m512 qx = _mm512_maskz_loadu_ps(m, q + x);
      a0 = _mm512_fmadd_ps(qx, load16(r0 + x, m), a0);
      a1 = _mm512_fmadd_ps(qx, load16(r1 + x, m), a1);
      a2 = _mm512_fmadd_ps(qx, load16(r2 + x, m), a2);
      a3 = _mm512_fmadd_ps(qx, load16(r3 + x, m), a3);
    }
    out[j] = hsum16(a0);
    out[j + 1] = hsum16(a1);
    out[j + 2] = hsum16(a2);
    out[j + 3] = hsum16(a3);
  }
  for (; j < n; ++j) {
    const T* r = static_cast<const T*>(rows[j]);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t x = 0; x < d; x += 16) {
      const __mmask16 m = mask_below(d - x);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + x), load16(r + x, m), acc);
    }
    out[j] = hsum16(acc);
  }
}

// Up to four 16-wide slices of acc at a time (independent chains, as in
// dot_avx512); each lane still adds the rows in order j = 0, 1, ...
template <typename T>
NNSIGHT_ROW_AVX512 void axpy_avx512(const float* w, const void* const* rows, int64_t n, int64_t d, float* acc) {
  int64_t x = 0;
  for (; x + 64 <= d; x += 64) {
    __m512 a0 = _mm512_loadu_ps(acc + x), a1 = _mm512_loadu_ps(acc + x + 16);
    __m512 a2 = _mm512_loadu_ps(acc + x + 32), a3 = _mm512_loadu_ps(acc + x + 48);
    for (int64_t j = 0; j < n; ++j) {
      const T* r = static_cast<const T*>(rows[j]) + x;
      const __m512 wj = _mm512_set1_ps(w[j]);
      a0 = _mm512_fmadd_ps(wj, load16(r, 0xFFFF), a0);
      a1 = _mm512_fmadd_ps(wj, load16(r + 16, 0xFFFF), a1);
      a2 = _mm512_fmadd_ps(wj, load16(r + 32, 0xFFFF), a2);
      a3 = _mm512_fmadd_ps(wj, load16(r + 48, 0xFFFF), a3);
    }
    _mm512_storeu_ps(acc + x, a0);
    _mm512_storeu_ps(acc + x + 16, a1);
    _mm512_storeu_ps(acc + x + 32, a2);
    _mm512_storeu_ps(acc + x + 48, a3);
  }
  for (; x < d; x += 16) {
    const __mmask16 m = mask_below(d - x);
    __m512 a = _mm512_maskz_loadu_ps(m, acc + x);
    for (int64_t j = 0; j < n; ++j)
      a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), load16(static_cast<const T*>(rows[j]) + x, m), a);
    _mm512_mask_storeu_ps(acc + x, m, a);
  }
}

#if defined(NNSIGHT_HAVE_LIBMVEC)
// 16 at a time by libmvec's expf (a few ulp from the exact value, the same
// on every call), summed per lane (j = l, l + 16, ...) and then by hsum16.
NNSIGHT_ROW_AVX512 float exp_sum_avx512(float* s, int64_t n, float* max_out) {
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = mask_below(n - j);
    mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, s + j));
  }
  *max_out = _mm512_reduce_max_ps(mx);
  const __m512 shift = _mm512_set1_ps(*max_out);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = mask_below(n - j);
    const __m512 e = _mm512_maskz_mov_ps(m, _ZGVeN16v_expf(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), shift)));
    _mm512_mask_storeu_ps(s + j, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  return hsum16(sum);
}
#endif

#endif

struct RowFns {
  DotFn dot[2];
  AxpyFn axpy[2];  // [RowType]
  ExpSumFn exp_sum = &exp_sum_portable;
};

const RowFns& row_fns() {
  static const RowFns fns = [] {
    RowFns f{{&dot_portable<float>, &dot_portable<uint16_t>}, {&axpy_portable<float>, &axpy_portable<uint16_t>}};
#if defined(__x86_64__) && defined(__GNUC__)
    if (cpu_features().avx512) {
      f = RowFns{{&dot_avx512<float>, &dot_avx512<uint16_t>}, {&axpy_avx512<float>, &axpy_avx512<uint16_t>}};
#if defined(NNSIGHT_HAVE_LIBMVEC)
      f.exp_sum = &exp_sum_avx512;
#endif
    } else if (cpu_features().avx2) {
      f = RowFns{{&dot_avx2<float>, &dot_avx2<uint16_t>}, {&axpy_avx2<float>, &axpy_avx2<uint16_t>}};
    }
#endif
    return f;
  }();
  return fns;
}

}  // namespace

void dot_rows(const float* q, const void* const* rows, RowType type, int64_t n, int64_t d, float* out) {
  row_fns().dot[static_cast<int>(type)](q, rows, n, d, out);
}

void axpy_rows(const float* w, const void* const* rows, RowType type, int64_t n, int64_t d, float* acc) {
  row_fns().axpy[static_cast<int>(type)](w, rows, n, d, acc);
}

float exp_shifted_sum(float* s, int64_t n, float* max_out) {
  float mx = 0.f;
  const float sum = row_fns().exp_sum(s, n, &mx);
  if (max_out != nullptr) *max_out = mx;
  return sum;
}

}  // namespace nnsight::kernels
