// exact_split_bench: would llama.cpp's integer dot products (vpdpbusd) beat
// the packed float tiles if the activations were not rounded to 8 bits but
// split exactly enough into three 8-bit parts? Kept so that the answer
// recorded in docs/benchmarks-history.md ("Ninth session") and docs/design.md can be
// measured again on another CPU. Not used by the library.
//
//   ./build/bench/exact_split_bench [--reps 1.0]
//
// The split: each 32-element block of a row of x is scaled by 2^E so that
// |x| 2^E < 128 and cut by floors into a signed a and unsigned b, c:
// x = 2^-E (a + b/256 + c/65536) + r, |r| < 2^-(E+16) (about one float32
// ulp of the block's largest element). The Q4_1 nibbles are the other
// (unsigned) operand of vpdpbusd; each lane's three sums are combined exactly
// in int32, converted once and scaled by d 2^-(E+16); m times the block's sum
// of x is one more FMA. Q4_1 only (the default model's type).
//
// Prints, per shape and number of rows, the split kernel's time and its error
// (against a double-precision sum, relative to the sum of |x w|) beside the
// library's packed kernel (kernels::packed_linear_on_path) and the float32
// kernel on the dequantized matrix, one thread, weights in L2; then one
// two-thread pass over a matrix larger than the caches.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/kernels/linear.h"
#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_matrix.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports the intrinsics' own _mm512_undefined_* placeholders as
// uninitialized once they are inlined (GCC bug 105593), as in the library.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

using namespace nnsight::kernels;

namespace {

#define SPLIT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")))

constexpr int kBlockBytes = 20;  // Q4_1: f16 d, f16 m, 16 bytes of nibbles
// A prepared row of x: per group of 4 blocks (128 elements) 8 vectors of 64
// bytes: a lo/hi, b lo/hi, c lo/hi (lo: elements 0-15 of each block, hi:
// 16-31, matching the nibble bytes' low and high halves), the lane scale
// 2^-(E+16), and the lane's share of the block's sum of x (its combined
// integer parts times 2^-(E+16)).
constexpr int kSlots = 8;

int64_t groups_of(int64_t K) { return (K / 32 + 3) / 4; }

SPLIT_TARGET void prepare_row(const float* x, int64_t K, uint8_t* out) {
  const int64_t nb = K / 32;
  std::memset(out, 0, static_cast<size_t>(groups_of(K) * kSlots * 64));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* g = out + (b / 4) * kSlots * 64;
    const int64_t j = b % 4;
    const __m512 v[2] = {_mm512_loadu_ps(x + 32 * b), _mm512_loadu_ps(x + 32 * b + 16)};
    const float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_abs_ps(v[1])));
    int E = 0;
    if (mx > 0.f) {
      int e;
      std::frexp(mx, &e);  // mx in [2^(e-1), 2^e)
      E = std::min(7 - e, 110);
    }
    const __m512 scale = _mm512_set1_ps(std::ldexp(1.f, E));
    alignas(64) int32_t comb[32];
    for (int h = 0; h < 2; ++h) {
      constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
      const __m512 y = _mm512_mul_ps(v[h], scale);
      const __m512 a = _mm512_roundscale_ps(y, kFloor);
      const __m512 r1 = _mm512_mul_ps(_mm512_sub_ps(y, a), _mm512_set1_ps(256.f));
      const __m512 b1 = _mm512_roundscale_ps(r1, kFloor);
      const __m512 r2 = _mm512_mul_ps(_mm512_sub_ps(r1, b1), _mm512_set1_ps(256.f));
      const __m512 c1 = _mm512_roundscale_ps(r2, kFloor);
      const __m512i ai = _mm512_cvtps_epi32(a), bi = _mm512_cvtps_epi32(b1), ci = _mm512_cvtps_epi32(c1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + (0 + h) * 64 + 16 * j), _mm512_cvtepi32_epi8(ai));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + (2 + h) * 64 + 16 * j), _mm512_cvtepi32_epi8(bi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + (4 + h) * 64 + 16 * j), _mm512_cvtepi32_epi8(ci));
      _mm512_store_si512(comb + 16 * h,
                         _mm512_add_epi32(_mm512_slli_epi32(ai, 16), _mm512_add_epi32(_mm512_slli_epi32(bi, 8), ci)));
    }
    const float s = std::ldexp(1.f, -(E + 16));
    float* lane_scale = reinterpret_cast<float*>(g + 6 * 64);
    float* lane_x = reinterpret_cast<float*>(g + 7 * 64);
    for (int l = 0; l < 4; ++l) {  // lane 4j + l: bytes 4l..4l+3 of block j, elements 4l.. and 16 + 4l..
      int32_t p = 0;
      for (int t = 0; t < 4; ++t) p += comb[4 * l + t] + comb[16 + 4 * l + t];
      lane_scale[4 * j + l] = s;
      lane_x[4 * j + l] = static_cast<float>(p) * s;
    }
  }
}

struct Tables {
  alignas(64) uint8_t nibbles[64];  // byte 16j + t <- byte 20j + 4 + t of four blocks
  alignas(64) uint16_t scales[32];  // word l <- d of block l / 4, word 16 + l <- its m
  Tables() {
    for (int j = 0; j < 4; ++j)
      for (int t = 0; t < 16; ++t) nibbles[16 * j + t] = static_cast<uint8_t>(kBlockBytes * j + 4 + t);
    for (int l = 0; l < 16; ++l) {
      scales[l] = static_cast<uint16_t>(kBlockBytes / 2 * (l / 4));
      scales[16 + l] = static_cast<uint16_t>(kBlockBytes / 2 * (l / 4) + 1);
    }
  }
};

// out[i * ldo + r] = x_i . w_r for MR prepared rows of x and NR rows of w.
template <int MR, int NR>
SPLIT_TARGET void split_tile(const uint8_t* const* xp, const uint8_t* const* w, int64_t K, float* out, int64_t ldo) {
  static const Tables tables;
  const int64_t nb = K / 32, groups = groups_of(K);
  const __m512i nib_idx = _mm512_load_si512(tables.nibbles), sc_idx = _mm512_load_si512(tables.scales);
  const __m512i low4 = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
  __m512 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const int bytes = static_cast<int>(std::min<int64_t>(4, nb - 4 * g)) * kBlockBytes;
    const __mmask64 m0 = bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
    const __mmask64 m1 = bytes > 64 ? (__mmask64(1) << (bytes - 64)) - 1 : 0;
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const uint8_t* p = w[r] + g * 4 * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char*>(p) + 2048, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p) + 2048 + 64, _MM_HINT_T0);
      const __m512i v0 = _mm512_maskz_loadu_epi8(m0, p);
      const __m512i v1 = _mm512_maskz_loadu_epi8(m1, p + 64);
      const __m512i nib = _mm512_permutex2var_epi8(v0, nib_idx, v1);
      const __m512i lo = _mm512_and_si512(nib, low4), hi = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low4);
      const __m512i sc = _mm512_permutexvar_epi16(sc_idx, v0);
      const __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(sc));
      const __m512 m = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1));
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const uint8_t* X = xp[i] + g * kSlots * 64;
        __m512i A = _mm512_dpbusd_epi32(zero, lo, _mm512_loadu_si512(X));
        A = _mm512_dpbusd_epi32(A, hi, _mm512_loadu_si512(X + 64));
        __m512i B = _mm512_dpbusd_epi32(zero, _mm512_loadu_si512(X + 128), lo);
        B = _mm512_dpbusd_epi32(B, _mm512_loadu_si512(X + 192), hi);
        __m512i C = _mm512_dpbusd_epi32(zero, _mm512_loadu_si512(X + 256), lo);
        C = _mm512_dpbusd_epi32(C, _mm512_loadu_si512(X + 320), hi);
        const __m512i T = _mm512_add_epi32(_mm512_slli_epi32(A, 16), _mm512_add_epi32(_mm512_slli_epi32(B, 8), C));
        const __m512 lane_scale = _mm512_loadu_ps(reinterpret_cast<const float*>(X + 384));
        acc[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), _mm512_mul_ps(d, lane_scale), acc[i][r]);
        acc[i][r] = _mm512_fmadd_ps(m, _mm512_loadu_ps(reinterpret_cast<const float*>(X + 448)), acc[i][r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) out[i * ldo + r] = _mm512_reduce_add_ps(acc[i][r]);
}

// Rows [r0, r1) of w (a multiple of 4) times M prepared rows.
void split_rows(const std::vector<uint8_t>& xp, int64_t M, const std::vector<uint8_t>& W, int64_t K, float* out,
                int64_t N, int64_t r0, int64_t r1) {
  const int64_t row_bytes = K / 32 * kBlockBytes, x_bytes = groups_of(K) * kSlots * 64;
  for (int64_t r = r0; r < r1; r += 4) {
    const uint8_t* w[4] = {&W[r * row_bytes], &W[(r + 1) * row_bytes], &W[(r + 2) * row_bytes],
                           &W[(r + 3) * row_bytes]};
    if (M % 4 != 0) {
      for (int64_t i = 0; i < M; ++i) {
        const uint8_t* x[1] = {&xp[i * x_bytes]};
        split_tile<1, 4>(x, w, K, out + i * N + r, N);
      }
    } else {
      for (int64_t i = 0; i < M; i += 4) {
        const uint8_t* x[4] = {&xp[i * x_bytes], &xp[(i + 1) * x_bytes], &xp[(i + 2) * x_bytes],
                               &xp[(i + 3) * x_bytes]};
        split_tile<4, 4>(x, w, K, out + i * N + r, N);
      }
    }
  }
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

// Random Q4_1 rows: scales like a real model's (d 0.001-0.02, m about -8 d).
SPLIT_TARGET std::vector<uint8_t> random_q4_1(int64_t N, int64_t K, std::mt19937& rng) {
  std::vector<uint8_t> W(static_cast<size_t>(N * K / 32 * kBlockBytes));
  for (auto& c : W) c = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (size_t b = 0; b < W.size() / kBlockBytes; ++b) {
    const uint16_t d = _cvtss_sh(scale(rng), 0), m = _cvtss_sh(-8.f * scale(rng), 0);
    std::memcpy(&W[b * kBlockBytes], &d, 2);
    std::memcpy(&W[b * kBlockBytes + 2], &m, 2);
  }
  return W;
}

void compare(int64_t N, int64_t K, int64_t M, int reps) {
  std::mt19937 rng(1);
  const std::vector<uint8_t> W = random_q4_1(N, K, rng);
  const PackedMatrix pw = make_packed_matrix(PackedType::Q4_1, N, K, W.data());
  const at::Tensor wf = pw.dequantize();  // [N, K]
  // Activations with a few large outliers, as in a real residual stream.
  at::Tensor x = at::randn({M, K}) * (1 + 29 * (at::rand({M, K}) < 0.02).to(at::kFloat));  // [M, K]
  const int64_t x_bytes = groups_of(K) * kSlots * 64;
  std::vector<uint8_t> xp(static_cast<size_t>(M * x_bytes));
  const float* xd = x.data_ptr<float>();
  for (int64_t i = 0; i < M; ++i) prepare_row(xd + i * K, K, &xp[i * x_bytes]);
  std::vector<float> out(static_cast<size_t>(M * N));
  split_rows(xp, M, W, K, out.data(), N, 0, N);
  // Error against a double-precision sum, relative to sum |x w| (the first 64 columns).
  const float* w = wf.data_ptr<float>();
  double err = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t r = 0; r < std::min<int64_t>(N, 64); ++r) {
      double exact = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        exact += double(xd[i * K + k]) * w[r * K + k];
        mag += std::fabs(double(xd[i * K + k]) * w[r * K + k]);
      }
      err = std::max(err, std::fabs(out[i * N + r] - exact) / mag);
    }
  const double t_split = best_of(reps, [&] {
    for (int64_t i = 0; i < M; ++i) prepare_row(xd + i * K, K, &xp[i * x_bytes]);
    split_rows(xp, M, W, K, out.data(), N, 0, N);
  });
  const PackedPath path = M <= packed_fused_max_rows(PackedType::Q4_1) ? PackedPath::Fused : PackedPath::Tiles;
  const double t_packed = best_of(reps, [&] { packed_linear_on_path(path, x, pw, at::Tensor()); });
  const double t_f32 = best_of(reps, [&] { linear(x, wf, at::Tensor()); });
  std::printf("| [%lld x %lld] | %lld | %.1f | %.1f (%s) | %.1f | %.2f | %.1e |\n", static_cast<long long>(N),
              static_cast<long long>(K), static_cast<long long>(M), t_split * 1e6, t_packed * 1e6,
              path == PackedPath::Fused ? "fused" : "tiles", t_f32 * 1e6, t_packed / t_split, err);
}

}  // namespace

int main(int argc, char** argv) {
  double reps_scale = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--reps") {
      reps_scale = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vbmi") ||
      !__builtin_cpu_supports("avx512bw") || !packed_path_available(PackedPath::Fused)) {
    std::printf("exact_split_bench needs AVX-512 with VNNI and VBMI; this CPU lacks them\n");
    return 0;
  }
  const auto reps = [&](int n) { return std::max(1, static_cast<int>(n * reps_scale)); };
  at::set_num_threads(1);
  std::printf("one thread, weights in L2 (times in us, best of several)\n\n");
  std::printf(
      "| w (Q4_1) | rows of x | exact split | library packed | float32 on dequantized | packed / split | "
      "split error / sum|xw| |\n|---|---|---|---|---|---|---|\n");
  compare(256, 1536, 1, reps(2000));
  compare(1536, 576, 1, reps(2000));
  compare(256, 1536, 8, reps(500));
  compare(1536, 576, 128, reps(20));

  // Two threads over a matrix larger than the caches, one row of x.
  const int64_t N = 40000, K = 1536;
  std::mt19937 rng(2);
  const std::vector<uint8_t> W = random_q4_1(N, K, rng);
  const PackedMatrix pw = make_packed_matrix(PackedType::Q4_1, N, K, W.data());
  at::Tensor x = at::randn({1, K});
  std::vector<uint8_t> xp(static_cast<size_t>(groups_of(K) * kSlots * 64));
  std::vector<float> out(static_cast<size_t>(N));
  const double t_split = best_of(reps(20), [&] {
    prepare_row(x.data_ptr<float>(), K, xp.data());
    std::thread other([&] { split_rows(xp, 1, W, K, out.data(), N, N / 8 * 4, N); });
    split_rows(xp, 1, W, K, out.data(), N, 0, N / 8 * 4);
    other.join();
  });
  at::set_num_threads(2);
  const double t_packed = best_of(reps(20), [&] { packed_linear_on_path(PackedPath::Fused, x, pw, at::Tensor()); });
  const double gb = static_cast<double>(W.size()) / 1e9;
  std::printf(
      "\ntwo threads, [%lld x %lld] Q4_1 (%.1f MB) from memory, one row: exact split %.0f us (%.1f GB/s), "
      "library packed %.0f us (%.1f GB/s)\n",
      static_cast<long long>(N), static_cast<long long>(K), gb * 1e3, t_split * 1e6, gb / t_split, t_packed * 1e6,
      gb / t_packed);
  return 0;
}

#else
int main() {
  std::printf("exact_split_bench needs an x86-64 CPU with AVX-512 VNNI and VBMI\n");
  return 0;
}
#endif
