#include "core/kernels/packed_linear_q8.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/kernels/cpu_features.h"
#include "core/kernels/packed_linear_q8_internal.h"
#include "core/kernels/packed_matmul_call.h"
#include "core/kernels/parallel_chunks.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports the intrinsics' own _mm512_undefined_* placeholders as
// uninitialized once they are inlined (GCC bug 105593), as in the other kernels.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define NNSIGHT_Q8_KERNELS 1
#define NNSIGHT_Q8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#endif

namespace nnsight::kernels {

using detail::kQ8Cols;
using detail::kQ8MaxRows;
using detail::Q8Kernels;
using detail::Q8Tile;

namespace {

constexpr int64_t kBlock = 32;     // elements per Q4_1 / Q8 block
constexpr int64_t kQ41Bytes = 20;  // Q4_1 block: f16 d, f16 m, 16 bytes of nibbles
constexpr int64_t kQ80Bytes = 34;  // Q8_0 block: f16 d, 32 int8
// A rounded row of x, per group of 4 blocks (128 elements): 64 bytes of
// elements 0-15 of each block (block j at bytes 16j..16j+15, the order of
// the nibbles' low halves), 64 bytes of elements 16-31 (the high halves),
// 16 floats of lane scales (vpdpbusd's lane l sums block l / 4: d of that
// block) and 16 floats of lane sums (s of block j in lane 4j, 0 in the
// others). A group past the last block is zeros (so are its weights, loaded
// under a mask), and adds 0.
constexpr int64_t kGroupBytes = 256;

int64_t groups_of(int64_t K) { return (K / kBlock + 3) / 4; }

// Output columns (w rows) per unit of the threads' split, and per block of w
// rows that every tile of x passes over while it is in L1/L2.
constexpr int64_t kRowsPerUnit = 16;
constexpr int64_t kBlockRows = 64;
// A thread is woken only for about this much work (ns), as in packed_linear.
constexpr double kMinThreadWorkNs = 4000.0;
// The tiles ask for the weights two tiles ahead of each row, within these
// bounds (bytes), as packed_linear's fused tiles do, but into L2 (prefetcht1),
// not L1: a Q8_0 [49152, 576] matrix from memory at one row, one thread
// (Zen 4 VM), read at 10.1-10.4 GB/s with prefetcht0 and at any distance
// from 1 to 20 KB ahead, at 21 GB/s with prefetcht1 (15.8 with t2, 9.9 nta,
// 1.5 with none); packed_linear's float tiles read it at 15 GB/s.
constexpr int64_t kPrefetchTiles = 2;
constexpr int64_t kMinPrefetchBytes = 1024, kMaxPrefetchBytes = int64_t(64) << 10;

constexpr int kMaxRows = 4;  // rows of x per AVX-512 tile
constexpr int kCols = kQ8Cols;

// The calling thread's buffer for the rounded rows of x, at least n bytes,
// 64-byte aligned (the tiles load it 64 bytes at a time), kept between calls.
uint8_t* rounded_x_buffer(size_t n) {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t[], Free> buf;
  thread_local size_t capacity = 0;
  if (capacity < n) {
    const size_t bytes = (n + 63) / 64 * 64;
    buf.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
    TORCH_CHECK(buf != nullptr, "packed_linear_q8: could not allocate a ", bytes, "-byte buffer");
    capacity = bytes;
  }
  return buf.get();
}

#if NNSIGHT_Q8_KERNELS

// One row of x ([K] float32) rounded into `out` (groups_of(K) * kGroupBytes),
// each q byte XORed with `flip` (0x80: stored as the unsigned q + 128).
NNSIGHT_Q8_TARGET void round_row(const float* x, int64_t K, uint8_t flip, uint8_t* out) {
  const int64_t nb = K / kBlock;
  std::memset(out, 0, static_cast<size_t>(groups_of(K) * kGroupBytes));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* g = out + (b / 4) * kGroupBytes;
    const int j = static_cast<int>(b % 4);
    const __m512 v0 = _mm512_loadu_ps(x + kBlock * b), v1 = _mm512_loadu_ps(x + kBlock * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.f;
    // 0 where 127 / amax is not finite (amax 0, below about 3.7e-37, or NaN).
    const float inv = 127.f / amax;
    const __m512 id = _mm512_set1_ps(std::isfinite(inv) ? inv : 0.f);
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), kNearest);
    const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), kNearest);
    const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 16 * j), _mm_xor_si128(_mm512_cvtepi32_epi8(q0), f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 64 + 16 * j), _mm_xor_si128(_mm512_cvtepi32_epi8(q1), f));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    float* lane_d = reinterpret_cast<float*>(g + 128);
    float* lane_s = reinterpret_cast<float*>(g + 192);
    for (int l = 0; l < 4; ++l) lane_d[4 * j + l] = d;
    lane_s[4 * j] = d * static_cast<float>(sum);
  }
}

// The weights of a group of 4 blocks are read by plain 64-byte loads that
// lie inside the group (so none reads past a row's, or the matrix's, end);
// only the last group of a row, when it has fewer blocks, takes masked loads
// of its own bytes. The bytes [off, off + 64) of a group's `bytes` that lie
// inside it:
inline __mmask64 load_mask(int64_t bytes, int64_t off) {
  if (off >= bytes) return 0;
  return bytes - off >= 64 ? ~__mmask64(0) : (__mmask64(1) << (bytes - off)) - 1;
}

// Word indices into the loads of 4 Q4_1 blocks (80 bytes) at 0 and 16: the
// 16 nibble bytes of block j (bytes 20j + 4..19: words 10j + 2.. of the
// first load for j < 3, words 24.. of the second for j = 3) to bytes
// 16j..16j+15; and d of block l / 4 (word 10 (l / 4) of the first) to word
// l, its m (word 10 (l / 4) + 1) to word 16 + l.
struct Q41Tables {
  alignas(64) uint16_t nibbles[32];
  alignas(64) uint16_t scales[32];
  Q41Tables() {
    for (int j = 0; j < 4; ++j)
      for (int u = 0; u < 8; ++u) nibbles[8 * j + u] = static_cast<uint16_t>(j < 3 ? 10 * j + 2 + u : 32 + 24 + u);
    for (int l = 0; l < 16; ++l) {
      scales[l] = static_cast<uint16_t>(10 * (l / 4));
      scales[16 + l] = static_cast<uint16_t>(10 * (l / 4) + 1);
    }
  }
};

// res[i * kCols + r] = rounded row xq[i] . Q4_1 row w[r], over nb blocks.
// Every output element takes the same operations in the same order for any
// MR and any position in the tile (batch invariance).
template <int MR>
NNSIGHT_Q8_TARGET void q4_1_tile(const uint8_t* const* xq, const uint8_t* const* w, int64_t nb, int64_t prefetch,
                                 float* res) {
  static const Q41Tables tables;
  const __m512i nib_idx = _mm512_load_si512(tables.nibbles), sc_idx = _mm512_load_si512(tables.scales);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[MR][kCols];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < kCols; ++r) acc[i][r] = _mm512_setzero_ps();
  const int64_t groups = (nb + 3) / 4;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t bytes = std::min<int64_t>(4, nb - 4 * g) * kQ41Bytes;
    const bool whole = bytes == 4 * kQ41Bytes;
    const __mmask64 m0 = load_mask(bytes, 0), m1 = load_mask(bytes, 16);
#pragma GCC unroll 4
    for (int r = 0; r < kCols; ++r) {
      const uint8_t* p = w[r] + g * 4 * kQ41Bytes;
      _mm_prefetch(reinterpret_cast<const char*>(p + prefetch), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(p + prefetch + 64), _MM_HINT_T1);
      const __m512i v0 = whole ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(m0, p);
      const __m512i v1 = whole ? _mm512_loadu_si512(p + 16) : _mm512_maskz_loadu_epi8(m1, p + 16);
      const __m512i nib = _mm512_permutex2var_epi16(v0, nib_idx, v1);
      const __m512i lo = _mm512_and_si512(nib, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low4);
      const __m512i sc = _mm512_permutexvar_epi16(sc_idx, v0);
      const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(sc));
      const __m512 mw = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1));
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const uint8_t* X = xq[i] + g * kGroupBytes;
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(X));
        dot = _mm512_dpbusd_epi32(dot, hi, _mm512_load_si512(X + 64));
        const __m512 scale = _mm512_mul_ps(dw, _mm512_load_ps(reinterpret_cast<const float*>(X + 128)));
        acc[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[i][r]);
        acc[i][r] = _mm512_fmadd_ps(mw, _mm512_load_ps(reinterpret_cast<const float*>(X + 192)), acc[i][r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < kCols; ++r) res[i * kCols + r] = _mm512_reduce_add_ps(acc[i][r]);
}

// Word indices into the loads of 4 Q8_0 blocks (136 bytes: f16 d and 32
// int8 per block) at 0 and 64: elements 0-15 of block j (bytes 34j + 2..17,
// words 17j + 1..8) to bytes 16j..16j+15, and d of block l / 4 (word
// 17 (l / 4)) to word l; into the loads at 8 and 72: elements 16-31 of
// block j (bytes 34j + 18..33) to bytes 16j..16j+15.
struct Q80Tables {
  alignas(64) uint16_t lo[32];
  alignas(64) uint16_t hi[32];
  alignas(64) uint16_t scales[32] = {};
  Q80Tables() {
    for (int j = 0; j < 4; ++j)
      for (int u = 0; u < 8; ++u) {
        lo[8 * j + u] = static_cast<uint16_t>(17 * j + 1 + u);
        hi[8 * j + u] = static_cast<uint16_t>((34 * j + 18 - (j < 2 ? 8 : 72 - 64)) / 2 + u);
      }
    for (int l = 0; l < 16; ++l) scales[l] = static_cast<uint16_t>(17 * (l / 4));
  }
};

// res[i * kCols + r] = rounded row xq[i] (bytes q + 128) . Q8_0 row w[r]:
// vpdpbusd takes the activations as the unsigned operand, so each lane
// starts from -128 times its weights' sum (computed once per row of w).
template <int MR>
NNSIGHT_Q8_TARGET void q8_0_tile(const uint8_t* const* xq, const uint8_t* const* w, int64_t nb, int64_t prefetch,
                                 float* res) {
  constexpr int64_t kGroup = 4 * kQ80Bytes;
  static const Q80Tables tables;
  const __m512i lo_idx = _mm512_load_si512(tables.lo), hi_idx = _mm512_load_si512(tables.hi);
  const __m512i sc_idx = _mm512_load_si512(tables.scales);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
  __m512 acc[MR][kCols];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < kCols; ++r) acc[i][r] = _mm512_setzero_ps();
  const int64_t groups = (nb + 3) / 4;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t bytes = std::min<int64_t>(4, nb - 4 * g) * kQ80Bytes;
    const bool whole = bytes == kGroup;
    const __mmask64 m0 = load_mask(bytes, 0), m1 = load_mask(bytes, 64), m2 = load_mask(bytes, 8),
                    m3 = load_mask(bytes, 72);
#pragma GCC unroll 4
    for (int r = 0; r < kCols; ++r) {
      const uint8_t* p = w[r] + g * kGroup;
      _mm_prefetch(reinterpret_cast<const char*>(p + prefetch), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(p + prefetch + 64), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(p + prefetch + 128), _MM_HINT_T1);
      const __m512i a0 = whole ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(m0, p);
      const __m512i a1 = whole ? _mm512_loadu_si512(p + 64) : _mm512_maskz_loadu_epi8(m1, p + 64);
      const __m512i b0 = whole ? _mm512_loadu_si512(p + 8) : _mm512_maskz_loadu_epi8(m2, p + 8);
      const __m512i b1 = whole ? _mm512_loadu_si512(p + 72) : _mm512_maskz_loadu_epi8(m3, p + 72);
      const __m512i lo = _mm512_permutex2var_epi16(a0, lo_idx, a1);
      const __m512i hi = _mm512_permutex2var_epi16(b0, hi_idx, b1);
      const __m512i start =
          _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, offset, lo), offset, hi));
      const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(a0, sc_idx, a1)));
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const uint8_t* X = xq[i] + g * kGroupBytes;
        __m512i dot = _mm512_dpbusd_epi32(start, _mm512_load_si512(X), lo);
        dot = _mm512_dpbusd_epi32(dot, _mm512_load_si512(X + 64), hi);
        const __m512 scale = _mm512_mul_ps(dw, _mm512_load_ps(reinterpret_cast<const float*>(X + 128)));
        acc[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[i][r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < kCols; ++r) res[i * kCols + r] = _mm512_reduce_add_ps(acc[i][r]);
}

int64_t avx512_row_bytes(int64_t K) { return groups_of(K) * kGroupBytes; }

// Q8_0's rounded bytes are stored offset by 128 (vpdpbusd's unsigned
// operand), Q4_1's not: two roundings.
void avx512_round_row(const float* x, int64_t K, uint8_t* out) { round_row(x, K, 0, out); }
void avx512_round_row_offset(const float* x, int64_t K, uint8_t* out) { round_row(x, K, 0x80, out); }

const detail::Q8Rounding kAvx512Rounding{avx512_row_bytes, avx512_round_row};
const detail::Q8Rounding kAvx512OffsetRounding{avx512_row_bytes, avx512_round_row_offset};

#endif  // NNSIGHT_Q8_KERNELS

// The instruction set packed_linear_q8 runs on this CPU, or null.
const Q8Kernels* q8_kernels() {
  static const Q8Kernels* const k = []() -> const Q8Kernels* {
    const std::vector<const Q8Kernels*> here = detail::q8_kernels_here();
    return here.empty() ? nullptr : here.front();
  }();
  return k;
}

// out[:, w.scan_row(p)] for p in [p_begin, p_end): blocks of kBlockRows w
// rows, each passed over by every tile of x (up to max_rows rows of x each).
void tile_columns(const Q8Tile* tiles, int max_rows, const uint8_t* xq, int64_t x_bytes, int64_t M,
                  const PackedMatrix& w, const float* bias, float* out, int64_t p_begin, int64_t p_end) {
  const int64_t N = w.rows, nb = w.cols / packed_traits(w.type).block_size;
  const int64_t prefetch =
      std::clamp<int64_t>(kPrefetchTiles * kCols * w.row_bytes(), kMinPrefetchBytes, kMaxPrefetchBytes);
  const uint8_t* xr[kQ8MaxRows];
  const uint8_t* wr[kCols];
  int64_t col[kCols];
  float res[kQ8MaxRows * kCols];
  for (int64_t pb = p_begin; pb < p_end; pb += kBlockRows) {
    const int64_t pe = std::min(pb + kBlockRows, p_end);
    for (int64_t m0 = 0; m0 < M; m0 += max_rows) {
      const int mr = static_cast<int>(std::min<int64_t>(max_rows, M - m0));
      for (int i = 0; i < mr; ++i) xr[i] = xq + (m0 + i) * x_bytes;
      for (int64_t p = pb; p < pe; p += kCols) {
        // Positions past the end repeat the last one, computed and not stored.
        const int nr = static_cast<int>(std::min<int64_t>(kCols, pe - p));
        for (int r = 0; r < kCols; ++r) {
          col[r] = w.scan_row(std::min(p + r, pe - 1));
          wr[r] = w.row(col[r]);
        }
        tiles[mr](xr, wr, nb, prefetch, res);
        for (int i = 0; i < mr; ++i) {
          float* o = out + (m0 + i) * N;
          for (int r = 0; r < nr; ++r)
            o[col[r]] = bias != nullptr ? res[i * kCols + r] + bias[col[r]] : res[i * kCols + r];
        }
      }
    }
  }
}

// Rough time of `rows` rows of w on one core: their packed bytes (~20 GB/s)
// and the integer products (~4 of the float kernel's ~100 GFLOP/s).
double rows_cost_ns(int64_t M, const PackedMatrix& w, int64_t rows) {
  const double weights = static_cast<double>(rows * w.cols);
  return static_cast<double>(rows * w.row_bytes()) / 20.0 + 2.0 * static_cast<double>(M) * weights / 400.0;
}

// One matrix of a call: its tiles, output [M, w.rows] and first unit in the
// call's shared numbering of units (kRowsPerUnit rows of w each).
struct Part {
  const PackedMatrix* w;
  const float* bias;  // [w.rows] or null
  float* out;         // [M, w.rows]
  int64_t unit0;
  int rounding = 0;  // run_parts' index of its rounded x
};

// out_i = x w_i^T (+ bias_i) for every part, x [M, K] float32: x rounded once
// per rounding the parts' types read (Q8TypeKernels::rounding), then all the
// parts' units shared out to the threads as one job (one fork-join for a
// layer's q/k/v or gate/up at decode).
void run_parts(const Q8Kernels& k, const float* x, int64_t M, int64_t K, std::vector<Part>& parts) {
  constexpr int kMaxRoundings = 6;  // one per type at most
  const detail::Q8Rounding* roundings[kMaxRoundings];
  int64_t offsets[kMaxRoundings];  // bytes into the buffer: [M, row_bytes] per rounding
  int num_roundings = 0;
  int64_t bytes = 0;
  for (Part& p : parts) {
    const detail::Q8Rounding* r = k.of(p.w->type)->rounding;
    int j = 0;
    while (j < num_roundings && roundings[j] != r) ++j;
    if (j == num_roundings) {
      TORCH_CHECK(num_roundings < kMaxRoundings, "packed_linear_q8: too many roundings");
      roundings[num_roundings] = r;
      offsets[num_roundings++] = bytes;
      bytes += M * r->row_bytes(K);
    }
    p.rounding = j;
  }
  uint8_t* buf = rounded_x_buffer(static_cast<size_t>(bytes));
  const int64_t round_grain = std::max<int64_t>(1, (int64_t(1) << 16) / K);
  kernels::parallel_for(0, M, round_grain, [&](int64_t m0, int64_t m1) {
    for (int j = 0; j < num_roundings; ++j)
      for (int64_t m = m0; m < m1; ++m)
        roundings[j]->round_row(x + m * K, K, buf + offsets[j] + m * roundings[j]->row_bytes(K));
  });
  int64_t units = 0;
  double cost = 0.0;
  for (Part& p : parts) {
    p.unit0 = units;
    const int64_t u = (p.w->rows + kRowsPerUnit - 1) / kRowsPerUnit;
    cost += rows_cost_ns(M, *p.w, kRowsPerUnit) * static_cast<double>(u);
    units += u;
  }
  const int64_t grain =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(kMinThreadWorkNs / (cost / static_cast<double>(units)))));
  kernels::parallel_for(0, units, grain, [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const Part& p = parts[i];
      const int64_t end = i + 1 < parts.size() ? parts[i + 1].unit0 : units;
      const int64_t a = std::max(u0, p.unit0), b = std::min(u1, end);
      if (a >= b) continue;
      const detail::Q8TypeKernels& t = *k.of(p.w->type);
      tile_columns(t.by_mr, t.max_rows, buf + offsets[p.rounding], t.rounding->row_bytes(K), M, *p.w, p.bias, p.out,
                   (a - p.unit0) * kRowsPerUnit, std::min((b - p.unit0) * kRowsPerUnit, p.w->rows));
    }
  });
}

}  // namespace

namespace detail {

std::vector<const Q8Kernels*> q8_kernels_here() {
  std::vector<const Q8Kernels*> here;
  // cpu_features() says AVX-512 F/BW/VL unless NNSIGHT_CPU caps it below.
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu_features().avx512 && __builtin_cpu_supports("avx512vnni") && avx512_q8_kernels() != nullptr)
    here.push_back(avx512_q8_kernels());
#endif
  if (cpu_features().avx2 && avx2_q8_kernels() != nullptr) here.push_back(avx2_q8_kernels());
  return here;
}

at::Tensor packed_linear_q8_on(const Q8Kernels& k, const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias) {
  TORCH_CHECK(k.of(w.type) != nullptr, "packed_linear_q8: ", packed_traits(w.type).name,
              " weights do not run with 8-bit activations on ", k.name);
  return packed_matmul("packed_linear_q8", x, w, bias,
                       [&](const float* x2, const PackedMatrix& w2, const float* b, float* out, int64_t M) {
                         std::vector<Part> parts{{&w2, b, out, 0}};
                         run_parts(k, x2, M, w2.cols, parts);
                       });
}

const Q8Kernels* avx512_q8_kernels() {
#if NNSIGHT_Q8_KERNELS
  // Q4_0 and the K-quants take the AVX2 tiles (for the K-quants vpmaddwd
  // folds the integer sub-block scales in; not written with vpdpbusd).
  static const Q8Kernels k = [] {
    const Q8Kernels* avx2 = avx2_q8_kernels();
    return Q8Kernels{
        "AVX-512 VNNI",
        avx2->q4_0,
        {&kAvx512Rounding, kMaxRows, {nullptr, q4_1_tile<1>, q4_1_tile<2>, q4_1_tile<3>, q4_1_tile<4>}},
        {&kAvx512OffsetRounding, kMaxRows, {nullptr, q8_0_tile<1>, q8_0_tile<2>, q8_0_tile<3>, q8_0_tile<4>}},
        avx2->q4_k,
        avx2->q5_k,
        avx2->q6_k};
  }();
  return &k;
#else
  return nullptr;
#endif
}
}  // namespace detail

bool packed_q8_available(PackedType type) { return q8_kernels() != nullptr && q8_kernels()->of(type) != nullptr; }

at::Tensor packed_linear_q8(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias) {
  TORCH_CHECK(packed_q8_available(w.type), "packed_linear_q8: ", packed_traits(w.type).name,
              " weights do not run with 8-bit activations on this CPU (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K with AVX2 "
              "or AVX-512 VNNI only)");
  return detail::packed_linear_q8_on(*q8_kernels(), x, w, bias);
}

std::vector<at::Tensor> packed_linear_q8_many(const at::Tensor& x, const std::vector<const PackedMatrix*>& ws,
                                              const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(biases.empty() || biases.size() == ws.size(), "packed_linear_q8_many: ", biases.size(), " biases for ",
              ws.size(), " matrices");
  const auto bias_of = [&](size_t i) { return biases.empty() ? at::Tensor() : biases[i]; };
  std::vector<at::Tensor> outs;
  outs.reserve(ws.size());
  bool together = !ws.empty() && x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous() &&
                  x.device().is_cpu() && x.size(0) > 0 && x.size(1) > 0;
  for (size_t i = 0; together && i < ws.size(); ++i) {
    const at::Tensor b = bias_of(i);
    together = packed_q8_available(ws[i]->type) && ws[i]->cols == x.size(1) && ws[i]->rows > 0 &&
               (!b.defined() || (b.dim() == 1 && b.size(0) == ws[i]->rows));
  }
  if (!together) {  // packed_linear_q8 takes them, or names what is wrong
    for (size_t i = 0; i < ws.size(); ++i) outs.push_back(packed_linear_q8(x, *ws[i], bias_of(i)));
    return outs;
  }
  const int64_t M = x.size(0);
  std::vector<at::Tensor> bs;  // float32 contiguous copies, kept alive for the call
  std::vector<Part> parts;
  for (size_t i = 0; i < ws.size(); ++i) {
    outs.push_back(new_output({M, ws[i]->rows}, x.options()));  // [M, N_i]
    at::Tensor b = bias_of(i);
    bs.push_back(b.defined() ? b.to(at::kFloat).contiguous() : b);
    parts.push_back(
        {ws[i], bs.back().defined() ? bs.back().data_ptr<float>() : nullptr, outs.back().data_ptr<float>(), 0});
  }
  run_parts(*q8_kernels(), x.data_ptr<float>(), M, x.size(1), parts);
  return outs;
}

}  // namespace nnsight::kernels
