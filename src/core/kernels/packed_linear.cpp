#include "core/kernels/packed_linear.h"

#include "core/kernels/kernel_gradients.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/kernels/call_successors.h"
#include "core/kernels/cpu_features.h"
#include "core/kernels/linear.h"
#include "core/kernels/packed_linear_internal.h"
#include "core/kernels/packed_matmul_call.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/undispatched.h"

namespace nnsight::kernels {

namespace {

using detail::PackedKernels;
using detail::TileArgs;
using detail::TileKernel;
using detail::TileSet;

// Threads split the output columns (w rows) in units of this many.
constexpr int64_t kRowsPerUnit = 16;

// Up to this many rows of x the fused tiles run (each weight decoded once
// per row tile, in registers); with more, decoding a block of rows once into
// a float buffer and running the float32 tiles over it is faster, as the
// decode is shared by every row of x. Both give the same bits. Measured per
// type (two threads, fused against Tiles; bench/packed_paths_bench). AVX-512:
// Q8_0's decode is one convert and one multiply, and its fused tiles stay
// ahead to 32 rows (an LM head [49152, 576] at 16 rows 4.9-5.1 against
// 6.1-6.2 ms, at 32 rows 9.7 against 10.6 ms); Q4_0 / Q4_1 to 16 (a decode
// step's Q4_1 projections at 16 rows 19.9-20.0 against 21.3-21.5 ms, at 24
// even, at 32 5-10 % behind); the 5-bit and K-quant types to 8 (at 12 rows
// 5-15 % behind). AVX2 (its tiles take 4 rows at a time; Zen 4 in AVX2
// mode): Q8_0 to 8 ([49152, 576] at 8 rows 0.91-0.95 of Tiles, at 16
// 1.14-1.19), the others to 4 (Q4_1 [9216, 576] at 4 rows 0.81-0.89, at 8
// 1.08-1.15; Q4_K [4096, 2048] 0.75-0.86 and 1.10-1.23).
int64_t fused_max_rows(PackedType type, LinearPath isa) {
  if (isa == LinearPath::Avx2) return type == PackedType::Q8_0 ? 8 : 4;
  switch (type) {
    case PackedType::Q8_0:
      return 32;
    case PackedType::Q4_0:
    case PackedType::Q4_1:
      return 16;
    default:
      return 8;
  }
}

// Fused tiles ask for (into L1) the memory about two tiles ahead of each row
// (a tile's rows are neighbours in memory, so that is the same rows of the
// tile after next), within these bounds (bytes). Measured single-threaded on
// the default model at one row against a fixed 512 bytes, one tile ahead
// within [1024, 4096]: the step's packed matmuls 16.8-17.1 -> 13.9-14.4 ms
// (down_proj 3.2 -> 2.0 ms, the Q8_0 LM head 4.2 -> 3.2 ms). With an upper
// bound of 3072, rows longer than about 400 bytes were asked for less than a
// tile ahead, where the tile's own rows had already been read: the
// Llama-3-8B-shaped Q4_K model (rows of 2304 and 8064 bytes) decoded at 2.69
// tokens/s, at 3.55-3.65 with this bound; the default model is unchanged
// within noise (its Q8_0 LM head perhaps 3 % slower, at 4896 bytes ahead
// instead of 3072).
constexpr int64_t kPrefetchTiles = 2;
constexpr int64_t kMinPrefetchBytes = 1024, kMaxPrefetchBytes = int64_t(64) << 10;

// How much of the next call's weights the pool's idle worker asks for
// between two calls (WarmHint, call_successors.h): of its own share, and of
// the caller's (which it brings into its own caches, from where the
// caller's reads are still faster than from memory). Batch-1 decode of the
// default model, 6 alternating pairs: median pair ratio 1.026 with 256 and
// 64 KiB; 0.98 against that with the caller's left out, 0.985 with 768 and
// 256 KiB.
constexpr int64_t kWarmWorkerBytes = int64_t(256) << 10, kWarmCallerBytes = int64_t(64) << 10;

// What a call reads first: its caller's share from the start of `first`,
// a worker's from row position `mid_row` of `mid` (the middle of the call's
// units, where the pool's second range begins).
WarmHint call_reads(const PackedMatrix& first, const PackedMatrix& mid, int64_t mid_row) {
  WarmHint h;
  h.data[0] = first.row(first.scan_row(0));
  h.bytes[0] = std::min(kWarmCallerBytes, first.rows * first.row_stride);
  h.data[1] = mid.row(mid.scan_row(mid_row));
  h.bytes[1] = std::min(kWarmWorkerBytes, (mid.rows - mid_row) * mid.row_stride);
  return h;
}

// A thread is woken only for about this much work (ns); see linear.cpp.
constexpr double kMinThreadWorkNs = 4000.0;

// The fused kernels of instruction set `isa` (nullptr for Scalar, or where
// this build or CPU lacks it).
const PackedKernels* fused_kernels(PackedType type, LinearPath isa) {
  if (!linear_path_available(isa, at::kFloat)) return nullptr;
  switch (isa) {
    case LinearPath::Avx512:
      return detail::avx512_packed_kernels(type);
    case LinearPath::Avx2:
      return detail::avx2_packed_kernels(type);
    case LinearPath::Scalar:
      break;
  }
  return nullptr;
}

// The instruction set packed_linear runs with: kernels::linear's float32
// path (the widest this CPU has), whose tiles the packed kernels match bit for bit.
LinearPath default_isa() { return linear_default_path(at::kFloat); }

const PackedKernels* fused_kernels(PackedType type) { return fused_kernels(type, default_isa()); }

void decode_row(const PackedKernels* k, PackedType type, const uint8_t* src, float* dst, int64_t n) {
  if (k != nullptr) {
    k->decode_row(src, dst, n);
  } else {
    decode_packed_reference(type, src, dst, n);
  }
}

// Rough time of `rows` rows of w on one core: streaming their packed bytes
// (~20 GB/s), decoding their weights (~0.05 ns each) and the multiply-adds
// (~100 GFLOP/s).
double rows_cost_ns(int64_t m, const PackedMatrix& w, int64_t rows) {
  const double bytes = static_cast<double>(rows * w.row_bytes());
  const double weights = static_cast<double>(rows * w.cols);
  return bytes / 20.0 + weights * 0.05 + 2.0 * static_cast<double>(m) * weights / 100.0;
}

// One fused tile's arguments, for w and bias, with the arrays they point at.
struct FusedCall {
  const void* xr[TileSet::kMaxRows];
  const void* wr[TileSet::kMaxRows];
  float* dst[TileSet::kMaxRows];
  int64_t col[TileSet::kMaxRows];
  float bias_f[TileSet::kMaxRows];
  TileArgs args;
  const PackedMatrix& w;
  const float* bias;

  FusedCall(const PackedMatrix& w_, const float* bias_) : w(w_), bias(bias_) {
    args.x = xr;
    args.w = wr;
    args.k = w.cols;
    args.ldo = w.rows;
    args.col = col;
    args.bias = bias != nullptr ? bias_f : nullptr;
  }

  // x rows [m0, m0 + mr) into out's same rows, by tk: its prefetch distance.
  void rows_of_x(const TileKernel& tk, const float* x, float* out, int64_t m0, int mr) {
    for (int i = 0; i < mr; ++i) xr[i] = x + (m0 + i) * w.cols;
    args.out = out + m0 * w.rows;
    // About two tiles ahead: the prefetch must run at least a whole tile ahead
    // of the loads to hide the memory's latency (one tile of the LM head, 4
    // rows of 612 bytes, takes about as long as a read from memory).
    args.prefetch = std::clamp<int64_t>(kPrefetchTiles * tk.nr * w.row_bytes(), kMinPrefetchBytes, kMaxPrefetchBytes);
  }

  // w rows row_at(p) for p in [p_begin, p_end), tk.nr at a time; with buf
  // (tk storing what it decodes), row r's weights to buf + (r - buf_row0) * K.
  template <class RowAt>
  void run(const TileKernel& tk, int64_t p_begin, int64_t p_end, RowAt row_at, float* buf = nullptr,
           int64_t buf_row0 = 0) {
    args.decoded = buf != nullptr ? dst : nullptr;
    for (int64_t p = p_begin; p < p_end; p += tk.nr) {
      // Positions past the end repeat the last one; they are computed and not
      // stored as sums (their decoded row is stored to its own place again).
      args.nr_store = static_cast<int>(std::min<int64_t>(tk.nr, p_end - p));
      for (int j = 0; j < tk.nr; ++j) {
        const int64_t row = row_at(std::min(p + j, p_end - 1));
        col[j] = row;
        wr[j] = w.row(row);
        if (buf != nullptr) dst[j] = buf + (row - buf_row0) * w.cols;
        if (bias != nullptr) bias_f[j] = bias[row];
      }
      tk.fn(args);
    }
  }
};

// out[:, w.scan_row(p)] for p in [n_begin, n_end) by the fused tiles.
void fused_columns(const PackedKernels& k, const float* x, const PackedMatrix& w, const float* bias, float* out,
                   int64_t M, int64_t n_begin, int64_t n_end) {
  FusedCall call(w, bias);
  for (int64_t m0 = 0; m0 < M; m0 += k.max_mr) {
    const int mr = static_cast<int>(std::min<int64_t>(k.max_mr, M - m0));
    const TileKernel& tk = k.by_mr[mr];
    call.rows_of_x(tk, x, out, m0, mr);
    // Positions p of w's scan order (its rows in memory order).
    call.run(tk, n_begin, n_end, [&](int64_t p) { return w.scan_row(p); });
  }
}

// The calling thread's decode buffer, at least n floats, 64-byte aligned.
// Kept between calls: a fresh 256 KiB vector each call (mapped, faulted in,
// zeroed, unmapped) cost prefill about 5 %. Aligned because the float32
// tiles load its rows 64 bytes at a time: `new float[n]` of this size came
// from mmap at 16 bytes past a page, and every load then spanned two cache
// lines (a 128-token prefill ran at 675-690 instead of 800-815 tokens/s in
// the runs where the buffer came out so).
float* scratch(size_t n) {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float[], Free> buf;
  thread_local size_t capacity = 0;
  if (capacity < n) {
    const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    buf.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    TORCH_CHECK(buf != nullptr, "packed_linear: could not allocate a ", bytes, "-byte decode buffer");
    capacity = n;
  }
  return buf.get();
}

// out[:, n] for n in [n_begin, n_end): blocks of rows decoded to a float
// buffer, then kernels::linear's float32 tiles.
void tile_columns(const PackedKernels* k, const TileSet& tiles, const float* x, const PackedMatrix& w,
                  const float* bias, float* out, int64_t M, int64_t n_begin, int64_t n_end) {
  const int64_t N = w.rows, K = w.cols;
  // Blocks of w rows decoded to a float buffer of kernels::linear's block
  // size, kept in L2 while every row tile of x passes over it.
  const int64_t block = detail::linear_block_rows(K, int64_t(sizeof(float)));
  float* buf = scratch(static_cast<size_t>(std::min(block, n_end - n_begin) * K));  // [block, K]
  // The first row tile of x by the fused tile that also stores what it
  // decodes: the decoding then runs beside that tile's multiply-adds instead
  // of in a pass of its own. AVX-512, two threads, packed / float32 time
  // alternating in one process (bench/packed_vs_float_bench), with -> without:
  // Q4_1 [1536, 576] at 32 rows 0.985-1.007 -> 1.011-1.025, [576, 1536]
  // 0.871-0.893 -> 0.908-0.965; Q5_0 at 24 rows 0.97-0.98 -> 1.00-1.08; Q8_0
  // at 64 rows 0.97-1.02 -> 1.03-1.04; Q6_K even. The AVX2 tiles have none:
  // there it was 3-5 % slower (Q4_1 at 32 rows).
  const bool fused_first = k != nullptr && k->decoding.fn != nullptr && M >= k->max_mr;
  const int64_t m_first = fused_first ? k->max_mr : 0;
  for (int64_t nb = n_begin; nb < n_end; nb += block) {
    const int64_t ne = std::min(nb + block, n_end);
    if (fused_first) {
      FusedCall call(w, bias);
      call.rows_of_x(k->decoding, x, out, 0, static_cast<int>(m_first));
      call.run(
          k->decoding, nb, ne, [](int64_t r) { return r; }, buf, nb);
    } else {
      for (int64_t r = nb; r < ne; ++r) decode_row(k, w.type, w.row(r), buf + (r - nb) * K, K);
    }
    if (M > m_first)
      detail::linear_columns_f32(tiles, x + m_first * K, buf, bias, out + m_first * N, M - m_first, N, K, nb, ne);
  }
}

void run(PackedPath path, LinearPath isa, const float* x, const PackedMatrix& w, const float* bias, float* out,
         int64_t M) {
  const PackedKernels* k = fused_kernels(w.type, isa);
  const bool fused =
      path == PackedPath::Fused || (path == PackedPath::Auto && k != nullptr && M <= fused_max_rows(w.type, isa));
  const TileSet* tiles = detail::linear_tiles(isa, at::kFloat);
  TORCH_CHECK(tiles != nullptr, "packed_linear: no float32 tiles");
  const int64_t N = w.rows;
  // The Tiles path cuts w as kernels::linear does (detail::kLinearRowsPerUnit).
  const int64_t unit = fused ? kRowsPerUnit : detail::kLinearRowsPerUnit;
  const int64_t units = (N + unit - 1) / unit;
  const int64_t grain =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(kMinThreadWorkNs / rows_cost_ns(M, w, unit))));
  const WarmHint next =
      detail::record_call_predict_next(w.row(w.scan_row(0)), call_reads(w, w, std::min(N - 1, units / 2 * unit)));
  kernels::parallel_for_then_warm(0, units, grain, next, [&](int64_t u0, int64_t u1) {
    const int64_t n0 = u0 * unit, n1 = std::min(u1 * unit, N);
    if (fused) {
      fused_columns(*k, x, w, bias, out, M, n0, n1);
    } else {
      tile_columns(k, *tiles, x, w, bias, out, M, n0, n1);
    }
  });
}

}  // namespace

bool packed_path_available(PackedPath path) { return packed_path_available(path, default_isa()); }

bool packed_path_available(PackedPath path, LinearPath isa) {
  if (!linear_path_available(isa, at::kFloat)) return false;
  if (path != PackedPath::Fused) return true;
  return fused_kernels(PackedType::Q4_0, isa) != nullptr;
}

int64_t packed_fused_max_rows(PackedType type) {
  return fused_kernels(type) != nullptr ? fused_max_rows(type, default_isa()) : 0;
}

at::Tensor packed_linear_on_path(PackedPath path, const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias) {
  return packed_linear_on_path(path, default_isa(), x, w, bias);
}

at::Tensor packed_linear_on_path(PackedPath path, LinearPath isa, const at::Tensor& x, const PackedMatrix& w,
                                 const at::Tensor& bias) {
  TORCH_CHECK(packed_path_available(path, isa), "packed_linear: the ", linear_path_name(isa),
              " path is not available here (the fused tiles need AVX2 or AVX-512)");
  return detail::packed_matmul("packed_linear", x, w, bias,
                               [&](const float* x2, const PackedMatrix& w2, const float* b, float* out, int64_t M) {
                                 run(path, isa, x2, w2, b, out, M);
                               });
}

at::Tensor packed_linear(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias) {
  if (records_grad(x)) return packed_linear_recorded(x, w, bias);
  return packed_linear_on_path(PackedPath::Auto, x, w, bias);
}

std::vector<at::Tensor> packed_linear_many(const at::Tensor& x, const std::vector<const PackedMatrix*>& ws,
                                           const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(biases.empty() || biases.size() == ws.size(), "packed_linear_many: ", biases.size(), " biases for ",
              ws.size(), " matrices");
  const auto bias_of = [&](size_t i) { return biases.empty() ? at::Tensor() : biases[i]; };
  const auto one_call_each = [&] {
    std::vector<at::Tensor> outs;
    outs.reserve(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) outs.push_back(packed_linear(x, *ws[i], bias_of(i)));
    return outs;
  };
  if (ws.empty() || records_grad(x) || x.dim() != 2 || x.scalar_type() != at::kFloat || !x.is_contiguous() ||
      x.size(0) < 1)
    return one_call_each();
  const int64_t M = x.size(0);
  struct Part {
    const PackedKernels* k;
    const PackedMatrix* w;
    at::Tensor bias;  // float32 contiguous, or undefined
    int64_t unit0;    // first unit of this matrix in the shared numbering
  };
  std::vector<Part> parts;
  parts.reserve(ws.size());
  int64_t units = 0;
  double cost = 0.0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const PackedMatrix& w = *ws[i];
    const PackedKernels* k = fused_kernels(w.type);
    const at::Tensor b = bias_of(i);
    if (k == nullptr || M > fused_max_rows(w.type, default_isa()) || w.cols != x.size(1) || w.cols == 0 ||
        w.rows == 0 || (b.defined() && (b.dim() != 1 || b.size(0) != w.rows)))
      return one_call_each();  // packed_linear takes them, or names what is wrong
    parts.push_back({k, &w, b.defined() ? b.to(at::kFloat).contiguous() : b, units});
    const int64_t u = (w.rows + kRowsPerUnit - 1) / kRowsPerUnit;
    cost += rows_cost_ns(M, w, kRowsPerUnit) * static_cast<double>(u);
    units += u;
  }
  std::vector<at::Tensor> outs;
  outs.reserve(ws.size());
  for (const Part& p : parts) outs.push_back(new_output({M, p.w->rows}, x.options()));  // [M, N_i]
  const int64_t grain =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(kMinThreadWorkNs / (cost / static_cast<double>(units)))));
  const float* xp = x.data_ptr<float>();
  // The part holding the middle unit, where the pool's second range begins.
  size_t mid = 0;
  while (mid + 1 < parts.size() && parts[mid + 1].unit0 <= units / 2) ++mid;
  const PackedMatrix& w0 = *parts[0].w;
  const PackedMatrix& wm = *parts[mid].w;
  const WarmHint next = detail::record_call_predict_next(
      w0.row(w0.scan_row(0)), call_reads(w0, wm, std::min(wm.rows - 1, (units / 2 - parts[mid].unit0) * kRowsPerUnit)));
  kernels::parallel_for_then_warm(0, units, grain, next, [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const Part& p = parts[i];
      const int64_t end = i + 1 < parts.size() ? parts[i + 1].unit0 : units;
      const int64_t a = std::max(u0, p.unit0), b = std::min(u1, end);
      if (a >= b) continue;
      const int64_t n0 = (a - p.unit0) * kRowsPerUnit, n1 = std::min((b - p.unit0) * kRowsPerUnit, p.w->rows);
      fused_columns(*p.k, xp, *p.w, p.bias.defined() ? p.bias.data_ptr<float>() : nullptr, outs[i].data_ptr<float>(), M,
                    n0, n1);
    }
  });
  return outs;
}

at::Tensor packed_embedding(const PackedMatrix& w, const at::Tensor& ids, at::ScalarType dtype) {
  TORCH_CHECK(ids.scalar_type() == at::kLong && ids.device().is_cpu(),
              "packed_embedding: ids must be int64 on the CPU");
  at::Tensor flat = ids.reshape({-1}).contiguous();  // [T]
  const int64_t T = flat.numel(), K = w.cols;
  const int64_t* id = flat.data_ptr<int64_t>();
  for (int64_t t = 0; t < T; ++t)
    TORCH_CHECK(id[t] >= 0 && id[t] < w.rows, "packed_embedding: index ", id[t], " out of range for ", w.rows, " rows");
  at::Tensor out = at::empty({T, K}, at::TensorOptions().dtype(at::kFloat));  // [T, K]
  float* dst = out.data_ptr<float>();
  const PackedKernels* k = fused_kernels(w.type);
  kernels::parallel_for(0, T, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) decode_row(k, w.type, w.row(id[t]), dst + t * K, K);
  });
  if (dtype != at::kFloat) out = out.to(dtype);
  std::vector<int64_t> sizes(ids.sizes().begin(), ids.sizes().end());
  sizes.push_back(K);
  return out.view(sizes);
}

}  // namespace nnsight::kernels
