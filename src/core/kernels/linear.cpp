#include "core/kernels/linear.h"

#include "core/kernels/kernel_gradients.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kernels/cpu_features.h"
#include "core/kernels/fixed_rows_linear.h"
#include "core/kernels/linear_tiles.h"
#include "core/kernels/packed_linear_internal.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/undispatched.h"
#include "core/kernels/kernel_path.h"

namespace nnsight::kernels {

namespace {

using detail::TileArgs;
using detail::TileKernel;
using detail::TileSet;

// Threads split N in units of this many w rows (one contiguous range per
// thread, which run_columns then cuts into streams).
constexpr int64_t kRowsPerUnit = detail::kLinearRowsPerUnit;

// With more rows of x than one tile holds, w is walked in blocks of about this
// many bytes, each kept in L2 while every row tile of x passes over it.
constexpr int64_t kWeightBlockBytes = int64_t(256) << 10;

// Reading w from memory, tiles ask for (into L2) the memory this far ahead of
// each stream: the hardware prefetchers alone leave the reads and the
// arithmetic serialized when both take similar time (M around 8).
constexpr int64_t kPrefetchBytes = 2048;

// A thread is woken only for about this much work (in ns, by the model in
// unit_cost_ns); smaller problems run on the calling thread. A warm fork-join
// of LibTorch's OpenMP pool costs about 1.3 us on the reference machine, and
// even the smallest layer of the default model ([576->192], one row, ~8-15 us)
// runs faster on both cores.
constexpr double kMinThreadWorkNs = 4000.0;

// The tiles of `path` for dtype, or nullptr where this build or CPU lacks them.
const TileSet* tiles_for(LinearPath path, at::ScalarType dtype) {
  const bool f32 = dtype == at::kFloat;
  if (!f32 && dtype != at::kBFloat16) return nullptr;
  const CpuFeatures& cpu = cpu_features();
  switch (path) {
    case LinearPath::Scalar:
      return f32 ? detail::scalar_tiles_f32() : detail::scalar_tiles_bf16();
    case LinearPath::Avx2:
      if (!cpu.avx2) return nullptr;
      return f32 ? detail::avx2_tiles_f32() : detail::avx2_tiles_bf16();
    case LinearPath::Avx512:
      if (!(f32 ? cpu.avx512 : cpu.avx512_bf16)) return nullptr;
      return f32 ? detail::avx512_tiles_f32() : detail::avx512_tiles_bf16();
  }
  return nullptr;
}

inline float to_float(float v) { return v; }
inline float to_float(uint16_t v) { return detail::float_from_bf16_bits(v); }

// Rough time of one unit of kRowsPerUnit w rows on one core of the reference
// machine: streaming its weights (~25 GB/s) plus its multiply-adds (~100
// GFLOP/s).
double unit_cost_ns(int64_t m, int64_t k, int64_t elem_bytes) {
  const double bytes = static_cast<double>(kRowsPerUnit * k * elem_bytes);
  const double flops = 2.0 * static_cast<double>(m * kRowsPerUnit * k);
  return bytes / 25.0 + flops / 100.0;
}

// out[m, n] = sums + bias for all m and n in [n_begin, n_end). T is float or
// uint16_t holding bfloat16 bits.
//
// Memory order: a tile's nr rows of w are not neighbours but come from nr
// far-apart stretches of the block, row r of each, so the tiles walk nr long
// sequential streams. The hardware prefetchers follow those; nr interleaved
// neighbouring rows (nr short streams restarting every tile) read at about a
// third of the bandwidth on the reference machine.
template <typename T>
void run_columns(const TileSet& tiles, const T* x, const T* w, const T* bias, T* out, int64_t M, int64_t N, int64_t K,
                 int64_t n_begin, int64_t n_end, int64_t w_row0 = 0) {
  // One tile of x rows covers all of M when M <= max_mr (decode): then w is
  // streamed exactly once and blocking it buys nothing.
  const int64_t block = M <= tiles.max_mr ? n_end - n_begin : detail::linear_block_rows(K, int64_t(sizeof(T)));
  const void* xr[TileSet::kMaxRows];
  const void* wr[TileSet::kMaxRows];
  int64_t col[TileSet::kMaxRows];
  float bias_f[TileSet::kMaxRows];
  TileArgs args;
  args.x = xr;
  args.w = wr;
  args.k = K;
  args.ldo = N;
  args.col = col;
  args.bias = bias != nullptr ? bias_f : nullptr;
  // w holds rows from w_row0 on (0: all of w).
  for (int64_t nb = n_begin; nb < n_end; nb += block) {
    const int64_t ne = std::min(nb + block, n_end), len = ne - nb;
    for (int64_t m0 = 0; m0 < M; m0 += tiles.max_mr) {
      const int mr = static_cast<int>(std::min<int64_t>(tiles.max_mr, M - m0));
      const TileKernel& tk = tiles.by_mr[mr];
      for (int i = 0; i < mr; ++i) xr[i] = x + (m0 + i) * K;
      args.out = out + m0 * N;
      // The first pass over a block reads it from memory; later ones find it in L2.
      args.prefetch = m0 == 0 ? kPrefetchBytes : 0;
      const int64_t stretch = (len + tk.nr - 1) / tk.nr;  // rows per stream
      for (int64_t r = 0; r < stretch; ++r) {
        // Rows past the block's end (the last stream may be shorter) repeat
        // row ne - 1; they are computed and not stored.
        args.nr_store = tk.nr;
        for (int j = 0; j < tk.nr; ++j) {
          col[j] = nb + j * stretch + r;
          if (col[j] >= ne && args.nr_store == tk.nr) args.nr_store = j;
          const int64_t row = std::min(col[j], ne - 1);
          wr[j] = w + (row - w_row0) * K;
          if (bias != nullptr) bias_f[j] = to_float(bias[row]);
        }
        tk.fn(args);
      }
    }
  }
}

template <typename T>
void run(const TileSet& tiles, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, at::Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  const T* xp = static_cast<const T*>(x.data_ptr());
  const T* wp = static_cast<const T*>(w.data_ptr());
  const T* bp = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  T* op = static_cast<T*>(out.data_ptr());
  const int64_t units = (N + kRowsPerUnit - 1) / kRowsPerUnit;
  const double cost = unit_cost_ns(M, K, int64_t(sizeof(T)));
  // K = 0 costs nothing (the bias alone): one grain of every unit, on the
  // calling thread (the quotient would be infinite, not an int64_t).
  const double grain_units = cost > 0 ? std::ceil(kMinThreadWorkNs / cost) : static_cast<double>(units);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(std::min(grain_units, static_cast<double>(units))));
  kernels::parallel_for(0, units, grain, [&](int64_t u0, int64_t u1) {
    run_columns<T>(tiles, xp, wp, bp, op, M, N, K, u0 * kRowsPerUnit, std::min(u1 * kRowsPerUnit, N));
  });
}

at::Tensor run_kernel(const TileSet& tiles, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const int64_t K = w.size(1), N = w.size(0);
  // The common case, a contiguous [M, K] x, skips the reshapes: for a small
  // layer at one row each ATen call is a noticeable part of the time.
  const bool flat = x.dim() == 2 && x.is_contiguous();
  int64_t M = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) M *= x.size(d);
  at::Tensor x2 = flat ? x : x.reshape({M, K}).contiguous();  // [M, K]
  at::Tensor b = bias.defined() && !bias.is_contiguous() ? bias.contiguous() : bias;
  at::Tensor out = new_output({M, N}, x.options());  // [M, N]
  if (out.numel() > 0) {
    if (x.scalar_type() == at::kFloat) {
      run<float>(tiles, x2, w, b, out);
    } else {
      run<uint16_t>(tiles, x2, w, b, out);
    }
  }
  if (flat) return out;
  std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes.back() = N;
  return out.view(out_sizes);
}

}  // namespace

namespace detail {

int64_t linear_block_rows(int64_t K, int64_t elem_bytes) {
  return std::max<int64_t>(kRowsPerUnit,
                           kWeightBlockBytes / std::max<int64_t>(1, K * elem_bytes) / kRowsPerUnit * kRowsPerUnit);
}

void linear_columns_f32(const TileSet& tiles, const float* x, const float* w_block, const float* bias, float* out,
                        int64_t M, int64_t N, int64_t K, int64_t n_begin, int64_t n_end) {
  run_columns<float>(tiles, x, w_block, bias, out, M, N, K, n_begin, n_end, n_begin);
}

const TileSet* linear_tiles(LinearPath path, at::ScalarType dtype) { return tiles_for(path, dtype); }

}  // namespace detail

const char* linear_path_name(LinearPath path) {
  switch (path) {
    case LinearPath::Scalar:
      return "scalar";
    case LinearPath::Avx2:
      return "avx2";
    case LinearPath::Avx512:
      return "avx512";
  }
  return "?";
}

bool linear_path_available(LinearPath path, at::ScalarType dtype) { return tiles_for(path, dtype) != nullptr; }

LinearPath linear_default_path(at::ScalarType dtype) {
  for (LinearPath p : {LinearPath::Avx512, LinearPath::Avx2})
    if (linear_path_available(p, dtype)) return p;
  return LinearPath::Scalar;
}

// Whether autograd must see this product (then only at::linear's graph will do).
static bool autograd_needs(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  return at::GradMode::is_enabled() &&
         (x.requires_grad() || w.requires_grad() || (bias.defined() && bias.requires_grad()));
}

bool linear_uses_kernel(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  if (!x.defined() || !w.defined()) return false;
  const at::ScalarType dt = x.scalar_type();
  if (dt != at::kFloat && dt != at::kBFloat16) return false;
  if (w.scalar_type() != dt || !cpu_kernels_for(x) || !cpu_kernels_for(w)) return false;
  if (x.layout() != at::kStrided || w.layout() != at::kStrided) return false;
  if (x.dim() < 1 || w.dim() != 2 || x.size(-1) != w.size(1) || !w.is_contiguous()) return false;
  if (bias.defined()) {
    if (bias.scalar_type() != dt || !bias.device().is_cpu() || bias.layout() != at::kStrided) return false;
    if (bias.dim() != 1 || bias.size(0) != w.size(0)) return false;
  }
  return !autograd_needs(x, w, bias);
}

at::Tensor linear_on_path(LinearPath path, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  TORCH_CHECK(linear_uses_kernel(x, w, bias), "kernels::linear_on_path: arguments the kernel does not take");
  const TileSet* tiles = tiles_for(path, x.scalar_type());
  TORCH_CHECK(tiles != nullptr, "kernels::linear_on_path: path ", linear_path_name(path), " is not available for ",
              x.scalar_type(), " on this CPU");
  return run_kernel(*tiles, x, w, bias);
}

// A device's GEMM in chunks of fixed rows (fixed_rows_linear.h) when asked
// for, or 0: never for the CPU kernels' tensors, nor under autograd, which
// needs at::linear's graph.
static int64_t fixed_rows_for(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const int64_t rows = fixed_rows();
  if (rows == 0 || cpu_kernels_for(x) || w.dim() != 2 || autograd_needs(x, w, bias)) return 0;
  return rows;
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  if (records_grad(x)) return linear_recorded(x, w, bias);
  if (!linear_uses_kernel(x, w, bias)) {
    if (const int64_t rows = fixed_rows_for(x, w, bias); rows > 0) return fixed_rows_linear(x, w, bias, rows);
    return at::linear(x, w, bias);
  }
  const TileSet* tiles = tiles_for(linear_default_path(x.scalar_type()), x.scalar_type());
  return run_kernel(*tiles, x, w, bias);
}

}  // namespace nnsight::kernels
