#include "core/kernels/fixed_rows_linear.h"

#include <ATen/ATen.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include <nnsight/error.hpp>

namespace nnsight::kernels {

namespace {

constexpr int64_t kMaxRows = 4096;
std::atomic<int64_t> g_rows{-1};  // -1: the environment not read yet

int64_t rows_from_environment() {
  const char* env = std::getenv("NNSIGHT_FIXED_ROWS");
  if (env == nullptr || *env == '\0') return 0;
  const std::string v = env;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n < 0 || n > kMaxRows)
    throw ConfigError("NNSIGHT_FIXED_ROWS='" + v + "': expected a whole number of rows from 1 to " +
                      std::to_string(kMaxRows) + " (or 0: off)");
  return n;
}

}  // namespace

int64_t fixed_rows() {
  int64_t rows = g_rows.load(std::memory_order_relaxed);
  if (rows < 0) {
    int64_t expected = -1;
    g_rows.compare_exchange_strong(expected, rows_from_environment());
    rows = g_rows.load(std::memory_order_relaxed);
  }
  return rows;
}

int64_t fixed_rows_reread_environment() {
  g_rows.store(-1);
  return fixed_rows();
}

at::Tensor fixed_rows_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, int64_t rows) {
  TORCH_CHECK(rows > 0, "fixed_rows_linear: rows must be positive");
  TORCH_CHECK(w.dim() == 2 && x.size(-1) == w.size(1), "fixed_rows_linear: x ", x.sizes(), " and w ", w.sizes());
  const int64_t k = w.size(1), n = w.size(0);
  const at::Tensor flat = x.reshape({-1, k});  // [m, k]
  const int64_t m = flat.size(0);
  const int64_t chunks = std::max<int64_t>(1, (m + rows - 1) / rows);
  // [chunks * rows, k]: the last chunk zero-padded, so every GEMM is [rows, k] x [k, n].
  const at::Tensor padded =
      m == chunks * rows ? flat.contiguous() : at::constant_pad_nd(flat, {0, 0, 0, chunks * rows - m});
  at::Tensor out = at::empty({chunks * rows, n}, flat.options());  // [chunks * rows, n]
  const at::Tensor wt = w.t();
  for (int64_t c = 0; c < chunks; ++c) {
    at::Tensor dst = out.narrow(0, c * rows, rows);
    at::mm_out(dst, padded.narrow(0, c * rows, rows), wt);
  }
  if (bias.defined()) out.add_(bias);  // elementwise: each row alone
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = n;
  return out.narrow(0, 0, m).view(shape);
}

UseFixedRows::UseFixedRows(int64_t rows) : before_(g_rows.load()) {
  TORCH_CHECK(rows >= 0 && rows <= kMaxRows, "UseFixedRows: rows from 0 to ", kMaxRows);
  g_rows.store(rows);
}

UseFixedRows::~UseFixedRows() { g_rows.store(before_); }

}  // namespace nnsight::kernels
