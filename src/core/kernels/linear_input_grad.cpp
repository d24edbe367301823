#include "core/kernels/linear_input_grad.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "core/kernels/cpu_features.h"
#include "core/kernels/lane_mask.h"
#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_linear_internal.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/row_ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC bug 105593 (see linear_tiles_avx512.cpp)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define NNSIGHT_GRAD_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#endif

namespace nnsight::kernels {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// out[i * ldo + x] += sum_j coeff[i * ldc + j] * rows[j][x] for four rows
// i < 4 of g at once and x < d: each row of w loaded once for the four (16
// accumulators over 64 columns), where axpy_rows loads it once per row of g.
// Each element's products are added in order j = 0, 1, ..., one FMA each, as
// axpy_rows adds them: the same sums.
NNSIGHT_GRAD_AVX512 void axpy4_avx512(const float* coeff, int64_t ldc, const void* const* rows, int64_t n, int64_t d,
                                      float* out, int64_t ldo) {
  int64_t x = 0;
  for (; x + 64 <= d; x += 64) {
    __m512 a[4][4];
    for (int i = 0; i < 4; ++i)
      for (int c = 0; c < 4; ++c) a[i][c] = _mm512_loadu_ps(out + i * ldo + x + 16 * c);
    for (int64_t j = 0; j < n; ++j) {
      const float* r = static_cast<const float*>(rows[j]) + x;
      const __m512 b0 = _mm512_loadu_ps(r), b1 = _mm512_loadu_ps(r + 16);
      const __m512 b2 = _mm512_loadu_ps(r + 32), b3 = _mm512_loadu_ps(r + 48);
      for (int i = 0; i < 4; ++i) {
        const __m512 s = _mm512_set1_ps(coeff[i * ldc + j]);
        a[i][0] = _mm512_fmadd_ps(s, b0, a[i][0]);
        a[i][1] = _mm512_fmadd_ps(s, b1, a[i][1]);
        a[i][2] = _mm512_fmadd_ps(s, b2, a[i][2]);
        a[i][3] = _mm512_fmadd_ps(s, b3, a[i][3]);
      }
    }
    for (int i = 0; i < 4; ++i)
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out + i * ldo + x + 16 * c, a[i][c]);
  }
  for (; x < d; x += 16) {
    const __mmask16 m = lanes_below16(d - x);
    __m512 a[4];
    for (int i = 0; i < 4; ++i) a[i] = _mm512_maskz_loadu_ps(m, out + i * ldo + x);
    for (int64_t j = 0; j < n; ++j) {
      const __m512 b = _mm512_maskz_loadu_ps(m, static_cast<const float*>(rows[j]) + x);
      for (int i = 0; i < 4; ++i) a[i] = _mm512_fmadd_ps(_mm512_set1_ps(coeff[i * ldc + j]), b, a[i]);
    }
    for (int i = 0; i < 4; ++i) _mm512_mask_storeu_ps(out + i * ldo + x, m, a[i]);
  }
}
#endif

// out[i * K + x] += sum_j coeff[i * R + j] * rows[j][x] for i < M, x < K.
void axpy_block(const float* coeff, int64_t R, const void* const* rows, RowType type, int64_t n, int64_t M, int64_t K,
                float* out) {
  int64_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  if (type == RowType::F32 && cpu_features().avx512)
    for (; i + 4 <= M; i += 4) axpy4_avx512(coeff + i * R, R, rows, n, K, out + i * K, K);
#endif
  for (; i < M; ++i) axpy_rows(coeff + i * R, rows, type, n, K, out + i * K);
}

// Reached rows of w per parallel chunk (each chunk sums into a partial dx of its own).
constexpr int64_t kChunkRows = 128;

using DecodeFn = void (*)(const uint8_t*, float*, int64_t);

// The rows of w that g [M, N] reaches (a column of g with a value other than
// 0), in increasing order, and g's values there, [M, R] row-major.
struct Reached {
  std::vector<int64_t> rows;
  std::vector<float> coeff;
};

Reached reached_rows(const at::Tensor& g2) {
  const int64_t M = g2.size(0), N = g2.size(1);
  const float* g = g2.data_ptr<float>();
  Reached r;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      if (!(g[m * N + n] == 0.f)) {  // NaN reaches its row too
        r.rows.push_back(n);
        break;
      }
  const int64_t R = static_cast<int64_t>(r.rows.size());
  r.coeff.resize(static_cast<size_t>(M * R));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < R; ++j) r.coeff[m * R + j] = g[m * N + r.rows[j]];
  return r;
}

// dx [M, K] = coeff [M, R] x (the reached rows of w) [R, K]. The reached
// rows are cut into chunks of kChunkRows, fixed whatever the thread count;
// the chunks run in parallel, each summing its rows into a partial [M, K] of
// its own a group of rows at a time (row(j, scratch) gives reached row j, K
// values, decoded into scratch or in place), and dx is the sum of the
// partials in chunk order. A thread streams whole rows of w, as the
// forward's kernel does.
template <class Row>
void sum_rows(int64_t M, int64_t K, const Reached& r, RowType type, bool decodes, float* dx, Row&& row) {
  const int64_t R = static_cast<int64_t>(r.rows.size());
  if (R == 0) return;
  const int64_t chunks = (R + kChunkRows - 1) / kChunkRows;
  // Rows decoded at once: their buffer (<= 128 KiB) stays in L2 while each row of g passes over it.
  const int64_t group = std::clamp<int64_t>((int64_t{128} << 10) / (K * 4), 8, 64);
  // Allocated here, as the pool's chunks must not throw: the partials, and
  // one decode buffer per chunk running at once (claimed below).
  std::vector<float> partial(static_cast<size_t>(chunks * M * K), 0.f);
  const int64_t slots =
      decodes
          ? std::min<int64_t>(chunks, std::max<int64_t>(at::get_num_threads(), std::thread::hardware_concurrency()) + 1)
          : 0;
  std::vector<float> scratch(static_cast<size_t>(slots * group * K));
  std::unique_ptr<std::atomic<bool>[]> busy(new std::atomic<bool>[static_cast<size_t>(std::max<int64_t>(slots, 1))]);
  for (int64_t i = 0; i < slots; ++i) busy[i].store(false);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    int64_t slot = -1;
    while (decodes && slot < 0)
      for (int64_t i = 0; i < slots && slot < 0; ++i)
        if (!busy[i].exchange(true, std::memory_order_acquire)) slot = i;
    float* buf = decodes ? scratch.data() + slot * group * K : nullptr;
    const void* p[64];
    for (int64_t c = c0; c < c1; ++c) {
      float* out = partial.data() + c * M * K;
      const int64_t end = std::min(R, (c + 1) * kChunkRows);
      for (int64_t j0 = c * kChunkRows; j0 < end; j0 += group) {
        const int64_t rows = std::min(group, end - j0);
        for (int64_t j = 0; j < rows; ++j) p[j] = row(j0 + j, decodes ? buf + j * K : nullptr);
        axpy_block(r.coeff.data() + j0, R, p, type, rows, M, K, out);
      }
    }
    if (decodes) busy[slot].store(false, std::memory_order_release);
  });
  for (int64_t c = 0; c < chunks; ++c) {
    const float* src = partial.data() + c * M * K;
    for (int64_t i = 0; i < M * K; ++i) dx[i] += src[i];
  }
}

at::Tensor shaped_like(const at::Tensor& dx, const at::Tensor& g, int64_t K) {
  std::vector<int64_t> shape = g.sizes().vec();
  shape.back() = K;
  return dx.view(shape).to(g.scalar_type());
}

// The row decoder the forward's packed kernel uses (all three give the reference's floats).
DecodeFn row_decoder(PackedType type) {
  if (packed_path_available(PackedPath::Fused, LinearPath::Avx512))
    if (const detail::PackedKernels* k = detail::avx512_packed_kernels(type)) return k->decode_row;
  if (packed_path_available(PackedPath::Fused, LinearPath::Avx2))
    if (const detail::PackedKernels* k = detail::avx2_packed_kernels(type)) return k->decode_row;
  return nullptr;
}

// More rows of g than the pool's kernel takes: w decoded a block of rows at a
// time into one buffer, multiplied in by BLAS; rows g does not reach are skipped.
at::Tensor packed_input_grad_blas(const at::Tensor& g2, const PackedMatrix& w, DecodeFn decode) {
  // ~4 MiB of decoded rows per block: few BLAS calls, bounded memory for wide rows.
  const int64_t block_rows = std::max<int64_t>(16, (int64_t{4} << 20) / (w.cols * 4));
  at::Tensor dx = at::zeros({g2.size(0), w.cols}, at::kFloat);  // [M, K]
  at::Tensor buffer = at::empty({std::min(block_rows, w.rows), w.cols}, at::kFloat);
  const at::Tensor live = g2.ne(0).any(0);  // [N]: the rows of w the gradient reaches
  const bool* reached = live.data_ptr<bool>();
  std::vector<int64_t> rows;
  for (int64_t r0 = 0; r0 < w.rows; r0 += block_rows) {
    const int64_t n = std::min(block_rows, w.rows - r0);
    rows.clear();
    for (int64_t r = r0; r < r0 + n; ++r)
      if (reached[r]) rows.push_back(r);
    if (rows.empty()) continue;
    const int64_t m = static_cast<int64_t>(rows.size());
    float* dst = buffer.data_ptr<float>();
    parallel_for(0, m, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (decode)
          decode(w.row(rows[i]), dst + i * w.cols, w.cols);
        else
          decode_packed_reference(w.type, w.row(rows[i]), dst + i * w.cols, w.cols);
      }
    });
    const at::Tensor gi = m == n ? g2.narrow(1, r0, n) : g2.index_select(1, at::tensor(rows, at::kLong));  // [M, m]
    dx.addmm_(gi, buffer.narrow(0, 0, m));  // [M, m] x [m, K]
  }
  return dx;
}

}  // namespace

at::Tensor linear_input_grad(const at::Tensor& g, const at::Tensor& w) {
  const bool kernel = w.dim() == 2 && w.device().is_cpu() && g.device().is_cpu() && w.is_contiguous() &&
                      (w.scalar_type() == at::kFloat || w.scalar_type() == at::kBFloat16) && g.size(-1) == w.size(0) &&
                      g.numel() / std::max<int64_t>(1, w.size(0)) <= kInputGradMaxRows;
  if (!kernel) return at::matmul(g, w);  // [..., N] x [N, K] -> [..., K]
  const int64_t N = w.size(0), K = w.size(1);
  const at::Tensor g2 = g.reshape({-1, N}).to(at::kFloat).contiguous();  // [M, N]
  const int64_t M = g2.size(0);
  at::Tensor dx = at::zeros({M, K}, at::kFloat);  // [M, K]
  const Reached r = reached_rows(g2);
  const bool bf16 = w.scalar_type() == at::kBFloat16;
  const char* base = static_cast<const char*>(w.data_ptr());
  const int64_t elem = bf16 ? 2 : 4;
  sum_rows(M, K, r, bf16 ? RowType::BF16 : RowType::F32, /*decodes=*/false, dx.data_ptr<float>(),
           [&](int64_t j, float*) -> const void* { return base + r.rows[j] * K * elem; });
  return shaped_like(dx, g, K);
}

at::Tensor packed_linear_input_grad(const at::Tensor& g, const PackedMatrix& w) {
  const DecodeFn decode = row_decoder(w.type);
  const at::Tensor g2 = g.reshape({-1, w.rows}).to(at::kFloat).contiguous();  // [M, N]
  const int64_t M = g2.size(0), K = w.cols;
  if (M > kInputGradMaxRows) return shaped_like(packed_input_grad_blas(g2, w, decode), g, K);
  at::Tensor dx = at::zeros({M, K}, at::kFloat);  // [M, K]
  const Reached r = reached_rows(g2);
  sum_rows(M, K, r, RowType::F32, /*decodes=*/true, dx.data_ptr<float>(),
           [&](int64_t j, float* scratch) -> const void* {
             if (decode)
               decode(w.row(r.rows[j]), scratch, K);
             else
               decode_packed_reference(w.type, w.row(r.rows[j]), scratch, K);
             return scratch;
           });
  return shaped_like(dx, g, K);
}

}  // namespace nnsight::kernels
