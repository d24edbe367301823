#include "core/kernels/paged_attention.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/kernels/call_successors.h"
#include "core/kernels/cuda_kernels.h"
#include "core/kernels/kernel_gradients.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/row_ops.h"
#include "core/kernels/undispatched.h"
#include "core/kernels/kernel_path.h"
#include "core/kernels/paged_attention_batched.h"
#include "core/kernels/paged_attention_flash.h"

namespace nnsight::kernels {

namespace {

// Copies row t of src ([T, kv_heads, head_dim], contiguous, the cache's
// dtype) into flat slot slot[t] of dst: index_copy_'s result without its two
// LibTorch calls per layer and step (a few microseconds at one token).
void copy_rows(at::Tensor& dst, const at::Tensor& src, const int64_t* slot, int64_t T) {
  const int64_t row = src.numel() / std::max<int64_t>(T, 1) * static_cast<int64_t>(src.element_size());  // bytes
  const int64_t slots = dst.numel() * static_cast<int64_t>(dst.element_size()) / std::max<int64_t>(row, 1);
  auto* out = static_cast<uint8_t*>(dst.data_ptr());
  const auto* in = static_cast<const uint8_t*>(src.data_ptr());
  for (int64_t t = 0; t < T; ++t) {
    TORCH_CHECK(slot[t] >= 0 && slot[t] < slots, "write_kv: slot ", slot[t], " outside the cache's ", slots);
    std::memcpy(out + slot[t] * row, in + t * row, static_cast<size_t>(row));
  }
}

}  // namespace

void write_kv(KVCache& cache, const at::Tensor& k, const at::Tensor& v, const batching::BatchMeta& meta) {
  const int64_t kvh = cache.num_kv_heads(), d = cache.head_dim();
  const auto direct = [&](const at::Tensor& t, const at::Tensor& c) {
    return cpu_kernels_for(t) && cpu_kernels_for(c) && t.scalar_type() == c.scalar_type() && t.is_contiguous() &&
           c.is_contiguous() && t.numel() == t.size(0) * kvh * d;
  };
  if (cpu_kernels_for(meta.slot_mapping) && meta.slot_mapping.scalar_type() == at::kLong &&
      meta.slot_mapping.is_contiguous() && meta.slot_mapping.numel() == k.size(0) && direct(k, cache.key) &&
      direct(v, cache.value)) {
    const int64_t* slot = meta.slot_mapping.data_ptr<int64_t>();
    copy_rows(cache.key, k, slot, k.size(0));
    copy_rows(cache.value, v, slot, v.size(0));
    return;
  }
  // [num_blocks * block_size, kv_heads, head_dim] views of the cache.
  cache.key.view({-1, kvh, d}).index_copy_(0, meta.slot_mapping, k.to(cache.key.dtype()));
  cache.value.view({-1, kvh, d}).index_copy_(0, meta.slot_mapping, v.to(cache.value.dtype()));
}

namespace {

// The storage types with vectorized row operations (row_ops.h).
template <typename scalar_t>
constexpr bool kVectorRows = std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, at::BFloat16>;

template <typename scalar_t>
constexpr RowType kRowType = std::is_same_v<scalar_t, float> ? RowType::F32 : RowType::BF16;

// Bytes of keys and values a chunk asks for ahead, within L2 (1-2 MiB per
// core on the machines measured).
constexpr int64_t kPrefetchBytes = int64_t(256) << 10;

// Keys per partial softmax. A query row's keys [first, p] are cut at
// multiples of kKeyChunk (absolute positions, so the cut depends only on the
// row's own keys); each piece j gives a partial (its scores' maximum m_j,
// the sum s_j of exp(score - m_j), and acc_j = sum of exp(score - m_j) *
// value), and the row's output is sum_j w_j acc_j / sum_j w_j s_j with w_j =
// exp(m_j - max_j m_j), summed in order j = 0, 1, .... With a single piece
// (every context up to kKeyChunk keys) that is acc / s exactly, the plain
// two-pass softmax. The pieces let a decode step's few rows spread over the
// threads by key ranges: with one work item per (sequence, head), batch-1
// decode of the default model (9 heads over 3 KV heads, two threads) had
// each thread read two of the three KV heads' rows, and a head's rows were
// long streams read once per head of its group.
constexpr int64_t kKeyChunk = 256;

// Partials a step may keep for the split form (bytes); beyond it (long
// prefills), each (sequence, head) item computes its rows' pieces in turn.
constexpr int64_t kMaxPartialBytes = int64_t(2) << 20;

// One piece's partial: m, s, then acc[d].
inline int64_t partial_floats(int64_t d) { return d + 2; }

// Scores of query row q (float, scaled) against key rows [0, n) of kr
// (soft-capped when cap > 0). Each score depends only on its own key row,
// so a row's scores are the same computed in one call or piece by piece.
template <typename scalar_t>
void row_scores(const float* q, const void* const* kr, int64_t n, int64_t d, float cap, float* scores) {
  if constexpr (kVectorRows<scalar_t>) {
    dot_rows(q, kr, kRowType<scalar_t>, n, d, scores);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const scalar_t* krow = static_cast<const scalar_t*>(kr[j]);
      float dot = 0.f;
      for (int64_t x = 0; x < d; ++x) dot += q[x] * static_cast<float>(krow[x]);
      scores[j] = dot;
    }
  }
  if (cap > 0.f) {
    for (int64_t j = 0; j < n; ++j) scores[j] = cap * std::tanh(scores[j] / cap);
  }
}

// A piece's partial from its n scores (overwritten) and value rows vr:
// writes m, s and acc[d] to out.
template <typename scalar_t>
void piece_partial(float* scores, const void* const* vr, int64_t n, int64_t d, float* out) {
  out[1] = exp_shifted_sum(scores, n, &out[0]);
  float* acc = out + 2;
  std::fill(acc, acc + d, 0.f);
  if constexpr (kVectorRows<scalar_t>) {
    axpy_rows(scores, vr, kRowType<scalar_t>, n, d, acc);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const float w = scores[j];
      const scalar_t* vrow = static_cast<const scalar_t*>(vr[j]);
      for (int64_t x = 0; x < d; ++x) acc[x] += w * static_cast<float>(vrow[x]);
    }
  }
}

// Scratch of merge_partials, kept by each thread across calls.
struct MergeScratch {
  std::vector<float> sum, w;
  std::vector<const void*> rows;
};

// A row's output from its pieces' partials (n of them, `stride` floats
// apart, in key order).
template <typename scalar_t>
void merge_partials(const float* parts, int64_t n, int64_t stride, int64_t d, MergeScratch& scratch, scalar_t* out) {
  if (n == 1) {  // what the general form computes then (w = 1, total = s, sum = acc), without its steps
    const float inv = 1.f / parts[1];
    for (int64_t x = 0; x < d; ++x) out[x] = static_cast<scalar_t>(parts[2 + x] * inv);
    return;
  }
  scratch.sum.resize(static_cast<size_t>(d));
  scratch.w.resize(static_cast<size_t>(n));
  scratch.rows.resize(static_cast<size_t>(n));
  float* sum = scratch.sum.data();
  float* w = scratch.w.data();
  const void** rows = scratch.rows.data();
  float top = parts[0];
  for (int64_t j = 1; j < n; ++j) top = std::max(top, parts[j * stride]);
  float total = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    const float* p = parts + j * stride;
    w[j] = std::exp(p[0] - top);
    total += w[j] * p[1];
    rows[j] = p + 2;
  }
  std::fill(sum, sum + d, 0.f);
  axpy_rows(w, rows, RowType::F32, n, d, sum);  // sum[x] = sum_j w[j] acc_j[x], j in order
  const float inv = 1.f / total;
  for (int64_t x = 0; x < d; ++x) out[x] = static_cast<scalar_t>(sum[x] * inv);
}

// Per query row: positions [first, p] of its keys and the pieces they span.
struct RowKeys {
  int64_t first, last;  // key positions, inclusive
  int64_t piece_begin, piece_end;
  // The row's keys in piece j: [piece_first(j), piece_last(j)].
  int64_t piece_first(int64_t j) const { return std::max(j * kKeyChunk, first); }
  int64_t piece_last(int64_t j) const { return std::min((j + 1) * kKeyChunk - 1, last); }
};
inline RowKeys row_keys(int64_t p, int64_t window) {
  const int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
  return RowKeys{first, p, first / kKeyChunk, p / kKeyChunk + 1};
}

// Every reduction of a query row depends only on head_dim and on the row's
// own keys (positions and values), so a token's output does not depend on
// which other sequences or tokens share the batch, nor on how the work was
// split: both schedules below compute the same pieces with piece_partial and
// merge them with merge_partials.
template <typename scalar_t>
void attention_cpu(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta, float scale,
                   const AttentionOptions& opt, at::Tensor& out) {
  const int64_t window = opt.sliding_window;
  const float cap = static_cast<float>(opt.logit_softcap);
  const int64_t num_heads = q.size(1), d = q.size(2);
  const int64_t kvh = cache.num_kv_heads(), bs = cache.block_size();
  const int64_t group = num_heads / kvh;
  const int64_t num_seqs = meta.num_seqs;
  const int64_t bt_stride = meta.block_tables.size(1);
  const scalar_t* qp = q.data_ptr<scalar_t>();
  const scalar_t* kp = cache.key.data_ptr<scalar_t>();
  const scalar_t* vp = cache.value.data_ptr<scalar_t>();
  scalar_t* op = out.data_ptr<scalar_t>();
  const int32_t* bt = meta.block_tables.data_ptr<int32_t>();
  const auto& qs = meta.query_start_host;
  const auto& ctx = meta.context_lens_host;
  const int64_t pf = partial_floats(d);
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(scalar_t));

  // Query row t, head h, as float times the scale, into qf[d].
  const auto scaled_query = [&](int64_t t, int64_t h, float* qf) {
    const scalar_t* qrow = qp + (t * num_heads + h) * d;
    for (int64_t x = 0; x < d; ++x) qf[x] = static_cast<float>(qrow[x]) * scale;
  };
  const auto key_row = [&](int64_t s, int64_t g, int64_t j, const scalar_t* base) {
    const int64_t slot = static_cast<int64_t>(bt[s * bt_stride + j / bs]) * bs + j % bs;
    return base + (slot * kvh + g) * d;
  };
  // Key and value rows [from, to) of (sequence s, KV head g) into L2, up to `budget` bytes.
  const auto prefetch_rows = [&](int64_t s, int64_t g, int64_t from, int64_t to, int64_t& budget) {
    for (int64_t j = from; j < to && budget > 0; ++j, budget -= 2 * row_bytes) {
      const char* k = reinterpret_cast<const char*>(key_row(s, g, j, kp));
      const char* v = reinterpret_cast<const char*>(key_row(s, g, j, vp));
      for (int64_t o = 0; o < row_bytes; o += 64) {
        __builtin_prefetch(k + o, 0, 2);
        __builtin_prefetch(v + o, 0, 2);
      }
    }
  };

  // This call, for the packed matmuls' successor prediction (the pool's
  // idle worker then warms the layer's keys and values after the matmul
  // before it, and o_proj's weights after this): the span of the first
  // sequence's first blocks (as many as the hint takes) in the key and the
  // value cache.
  WarmHint reads;
  if (num_seqs > 0 && ctx[0] > 0) {
    const int64_t block_bytes = bs * kvh * d * static_cast<int64_t>(sizeof(scalar_t));
    const int64_t blocks = std::min((ctx[0] + bs - 1) / bs, std::max<int64_t>(1, kPrefetchBytes / 2 / block_bytes));
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      lo = std::min<int64_t>(lo, bt[b]);
      hi = std::max<int64_t>(hi, bt[b] + 1);
    }
    const int64_t span = std::min(kPrefetchBytes / 2, (hi - lo) * block_bytes);
    reads.data[0] = reinterpret_cast<const char*>(kp) + lo * block_bytes;
    reads.data[1] = reinterpret_cast<const char*>(vp) + lo * block_bytes;
    reads.bytes[0] = reads.bytes[1] = span;
  }
  const WarmHint next = detail::record_call_predict_next(kp, reads);

  // The split form's layout, per sequence: its first work item, where its
  // partials start (floats), and its first piece -- those of its first query
  // row's first key to its last row's last key (rows' spans only grow with
  // the row). Work items: one per (sequence, piece, head).
  thread_local std::vector<int64_t> unit_start, part_base, piece_first;
  unit_start.assign(static_cast<size_t>(num_seqs + 1), 0);
  part_base.assign(static_cast<size_t>(num_seqs), 0);
  piece_first.assign(static_cast<size_t>(num_seqs), 0);
  int64_t units = 0, partial_floats_total = 0, most_pieces = 0;
  for (int64_t s = 0; s < num_seqs; ++s) {
    unit_start[s] = units;
    const int64_t q_len = qs[s + 1] - qs[s];
    if (q_len == 0) continue;
    const int64_t cached = ctx[s] - q_len;
    const int64_t b = row_keys(cached, window).piece_begin, e = row_keys(cached + q_len - 1, window).piece_end;
    piece_first[s] = b;
    part_base[s] = partial_floats_total;
    partial_floats_total += q_len * num_heads * (e - b) * pf;
    units += (e - b) * num_heads;
    most_pieces = std::max(most_pieces, e - b);
  }
  unit_start[num_seqs] = units;

  // The split form wherever a row has several pieces and their partials
  // fit: besides spreading few rows over the threads, it keeps the heads of
  // a KV head on one piece at a time, whose keys and values stay in L2 for
  // them (a Llama-3-8B-shaped layer at batch 1, 2048 keys: 1.7-2.7 ms per
  // call with one item per (sequence, head), which read a KV head's 2 MB
  // once per query head, 1.3-1.9 ms split).
  if (most_pieces > 1 && partial_floats_total * static_cast<int64_t>(sizeof(float)) <= kMaxPartialBytes) {
    // Split form: each item computes its piece's partial for every query
    // row of the sequence that reaches it, and the item that completes a
    // row's last missing piece merges the row. Partials live in the calling
    // thread's scratch: [row, head, piece of the sequence].
    thread_local std::vector<float> partials;
    thread_local std::unique_ptr<std::atomic<int32_t>[]> missing;  // per (row, head): pieces not yet computed
    thread_local int64_t missing_size = 0;
    const int64_t rows = q.size(0);
    partials.resize(static_cast<size_t>(partial_floats_total));
    if (missing_size < rows * num_heads) {
      missing.reset(new std::atomic<int32_t>[static_cast<size_t>(rows * num_heads)]);
      missing_size = rows * num_heads;
    }
    for (int64_t s = 0; s < num_seqs; ++s) {
      const int64_t q_len = qs[s + 1] - qs[s];
      for (int64_t i = 0; i < q_len; ++i) {
        const RowKeys rk = row_keys(ctx[s] - q_len + i, window);
        for (int64_t h = 0; h < num_heads; ++h)
          missing[(qs[s] + i) * num_heads + h].store(static_cast<int32_t>(rk.piece_end - rk.piece_begin),
                                                     std::memory_order_relaxed);
      }
    }
    // The calling thread's scratch, by pointer: inside the job a
    // thread_local's name is the running thread's own.
    float* part = partials.data();
    std::atomic<int32_t>* miss = missing.get();
    const int64_t* ustart = unit_start.data();
    const int64_t* pbase = part_base.data();
    const int64_t* pfirst = piece_first.data();

    kernels::parallel_for_then_warm(0, units, 1, next, [&](int64_t begin, int64_t end) {
      // Scratch kept by each thread across calls: at one token a layer's
      // attention is a few microseconds, and fresh vectors per chunk were a
      // visible part of it.
      thread_local std::vector<float> qf, scores;
      thread_local std::vector<const void*> krows, vrows;
      thread_local MergeScratch merge;
      qf.resize(static_cast<size_t>(d));
      scores.resize(static_cast<size_t>(kKeyChunk));
      krows.resize(static_cast<size_t>(kKeyChunk));
      vrows.resize(static_cast<size_t>(kKeyChunk));
      // The (sequence, piece, KV head) an item reads: items of one come one after another.
      const auto rows_key = [&](int64_t s, int64_t j, int64_t g) { return (s * (int64_t(1) << 40)) + j * kvh + g; };
      int64_t s = 0;
      // Every key and value row the chunk reads, asked for first (up to
      // kPrefetchBytes): the weights streamed between two layers' attention
      // push the cache out of L3, and one piece's loop alone keeps too few
      // reads in flight to hide the memory's latency (a decode step's
      // attention at 128-160 keys, two threads, in minutes when other tenants
      // loaded the memory: 25.0-25.3 -> 19.6-20.3 us per layer).
      {
        int64_t budget = kPrefetchBytes, last = -1;
        for (int64_t item = begin; item < end && budget > 0; ++item) {
          while (ustart[s + 1] <= item) ++s;
          const int64_t k = item - ustart[s], j = pfirst[s] + k / num_heads, g = k % num_heads / group;
          const int64_t key = rows_key(s, j, g);
          if (key == last) continue;
          last = key;
          const int64_t q_len = qs[s + 1] - qs[s];
          prefetch_rows(s, g, std::max(j * kKeyChunk, row_keys(ctx[s] - q_len, window).first),
                        std::min<int64_t>((j + 1) * kKeyChunk, ctx[s]), budget);
        }
      }
      s = 0;
      int64_t resolved = -1;
      for (int64_t item = begin; item < end; ++item) {
        while (ustart[s + 1] <= item) ++s;
        const int64_t k = item - ustart[s], jl = k / num_heads, h = k % num_heads, g = h / group;
        const int64_t j = pfirst[s] + jl;
        const int64_t q_len = qs[s + 1] - qs[s], cached = ctx[s] - q_len;
        const int64_t n_pieces = (ustart[s + 1] - ustart[s]) / num_heads;
        // Rows of this piece, for the whole piece (each query row takes its part).
        const int64_t lo = j * kKeyChunk, hi = std::min<int64_t>((j + 1) * kKeyChunk, ctx[s]);  // [lo, hi)
        const int64_t key = rows_key(s, j, g);
        if (key != resolved) {
          for (int64_t x = lo; x < hi; ++x) {
            krows[x - lo] = key_row(s, g, x, kp);
            vrows[x - lo] = key_row(s, g, x, vp);
          }
          resolved = key;
        }
        for (int64_t i = 0; i < q_len; ++i) {
          const RowKeys rk = row_keys(cached + i, window);
          if (j < rk.piece_begin || j >= rk.piece_end) continue;
          const int64_t a = rk.piece_first(j), b = rk.piece_last(j);  // keys [a, b]
          const int64_t t = qs[s] + i;
          scaled_query(t, h, qf.data());
          float* row_parts = part + pbase[s] + ((i * num_heads + h) * n_pieces) * pf;
          row_scores<scalar_t>(qf.data(), krows.data() + (a - lo), b - a + 1, d, cap, scores.data());
          piece_partial<scalar_t>(scores.data(), vrows.data() + (a - lo), b - a + 1, d, row_parts + jl * pf);
          // The last piece of this (row, head) to finish merges it; the
          // acquire-release count makes the other threads' partials visible.
          if (miss[t * num_heads + h].fetch_sub(1, std::memory_order_acq_rel) == 1) {
            merge_partials<scalar_t>(row_parts + (rk.piece_begin - pfirst[s]) * pf, rk.piece_end - rk.piece_begin, pf,
                                     d, merge, op + (t * num_heads + h) * d);
          }
        }
      }
    });
    return;
  }

  // Long prefills: one work item per (sequence, head); each query row's
  // pieces in turn, then its merge.
  kernels::parallel_for_then_warm(0, num_seqs * num_heads, 1, next, [&](int64_t begin, int64_t end) {
    {
      int64_t budget = kPrefetchBytes, last_s = -1, last_g = -1;
      for (int64_t item = begin; item < end && budget > 0; ++item) {
        const int64_t s = item / num_heads, g = item % num_heads / group;
        if (s == last_s && g == last_g) continue;
        const int64_t q_len = qs[s + 1] - qs[s];
        if (q_len > 0) prefetch_rows(s, g, row_keys(ctx[s] - q_len, window).first, ctx[s], budget);
        last_s = s;
        last_g = g;
      }
    }
    thread_local std::vector<float> qf, scores, parts;  // kept across calls, as in the split form
    thread_local std::vector<const void*> krows, vrows;
    thread_local MergeScratch merge;
    qf.resize(static_cast<size_t>(d));
    int64_t resolved_s = -1, resolved_g = -1;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t s = item / num_heads, h = item % num_heads, g = h / group;
      const int64_t q_begin = qs[s], q_len = qs[s + 1] - qs[s], context = ctx[s];
      if (q_len == 0) continue;
      const int64_t cached = context - q_len;
      if (static_cast<int64_t>(scores.size()) < context) scores.resize(static_cast<size_t>(context));
      if (s != resolved_s || g != resolved_g) {
        krows.resize(static_cast<size_t>(context));
        vrows.resize(static_cast<size_t>(context));
        for (int64_t x = 0; x < context; ++x) {
          krows[x] = key_row(s, g, x, kp);
          vrows[x] = key_row(s, g, x, vp);
        }
        resolved_s = s;
        resolved_g = g;
      }
      for (int64_t i = 0; i < q_len; ++i) {
        const int64_t t = q_begin + i;
        const RowKeys rk = row_keys(cached + i, window);
        scaled_query(t, h, qf.data());
        parts.resize(static_cast<size_t>((rk.piece_end - rk.piece_begin) * pf));
        // All the row's scores first (the keys as one stream), then the
        // pieces' partials (the values as one stream).
        row_scores<scalar_t>(qf.data(), krows.data() + rk.first, rk.last - rk.first + 1, d, cap, scores.data());
        for (int64_t j = rk.piece_begin; j < rk.piece_end; ++j) {
          const int64_t a = rk.piece_first(j), b = rk.piece_last(j);
          piece_partial<scalar_t>(scores.data() + (a - rk.first), vrows.data() + a, b - a + 1, d,
                                  parts.data() + (j - rk.piece_begin) * pf);
        }
        merge_partials<scalar_t>(parts.data(), rk.piece_end - rk.piece_begin, pf, d, merge,
                                 op + (t * num_heads + h) * d);
      }
    }
  });
}

}  // namespace

at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, KVCache& cache,
                  const batching::BatchMeta& meta, double scale, const AttentionOptions& options) {
  if (records_grad(q) || records_grad(k) || records_grad(v))
    return attend_recorded(q, k, v, cache, meta, scale, options);
  write_kv(cache, k, v, meta);
  return paged_attention(q, cache, meta, scale, options);
}

at::Tensor paged_attention(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta, double scale,
                           const AttentionOptions& options) {
  TORCH_CHECK(q.dim() == 3, "paged_attention: q must be [tokens, heads, head_dim]");
  TORCH_CHECK(q.size(1) % cache.num_kv_heads() == 0, "paged_attention: heads not a multiple of kv heads");
  TORCH_CHECK(options.sliding_window >= 0 && options.logit_softcap >= 0.0, "paged_attention: bad options");
  if (!cpu_kernels_for(q)) {
    if (cuda::decode_attention_applies(q, cache, meta))
      return cuda::paged_decode_attention(q, cache, meta, scale, options);
    at::Tensor out = flash_attention_applies(q, cache, meta, options)
                         ? paged_attention_flash(q, cache, meta, scale, options)
                         : paged_attention_batched(q, cache, meta, scale, options);
    // A decoding sequence beside prefills: its row from the decode kernel,
    // as in a decode step, whatever its companions (batch invariance).
    if (cuda_kernels_for(q)) {
      out = out.contiguous();
      cuda::redo_one_row_sequences(q, cache, meta, scale, options, out);
    }
    return out;
  }
  // Without the conversions' dispatch when there is nothing to convert (every decode step).
  const bool same = q.scalar_type() == cache.key.scalar_type();
  at::Tensor qc = same && q.is_contiguous() ? q : q.to(cache.key.dtype()).contiguous();
  at::Tensor out = new_output_like(qc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, qc.scalar_type(), "paged_attention", [&] {
    attention_cpu<scalar_t>(qc, cache, meta, static_cast<float>(scale), options, out);
  });
  return same ? out : out.to(q.dtype());
}

at::Tensor paged_attention_generic(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                   double scale, const AttentionOptions& options) {
  const int64_t num_heads = q.size(1), d = q.size(2);
  const int64_t kvh = cache.num_kv_heads(), bs = cache.block_size();
  const int64_t group = num_heads / kvh;
  at::Tensor out = at::empty_like(q);
  at::Tensor flat_k = cache.key.view({-1, kvh, d});  // [slots, kv_heads, head_dim]
  at::Tensor flat_v = cache.value.view({-1, kvh, d});
  auto long_opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    const int64_t q_begin = meta.query_start_host[s];
    const int64_t q_len = meta.query_len(s);
    const int64_t context = meta.context_lens_host[s];
    if (q_len == 0) continue;
    const int64_t cached = context - q_len;
    at::Tensor pos = at::arange(context, long_opts);  // [context]
    at::Tensor blocks = meta.block_tables[s].to(at::kLong).index_select(0, pos.div(bs, "floor"));
    at::Tensor slots = blocks * bs + pos.remainder(bs);
    at::Tensor k = flat_k.index_select(0, slots).to(q.dtype());  // [context, kv_heads, d]
    at::Tensor v = flat_v.index_select(0, slots).to(q.dtype());
    if (group > 1) {
      k = k.repeat_interleave(group, 1);  // [context, heads, d]
      v = v.repeat_interleave(group, 1);
    }
    at::Tensor qs = q.narrow(0, q_begin, q_len).transpose(0, 1);  // [heads, q_len, d]
    at::Tensor scores = at::matmul(qs.to(at::kFloat), k.permute({1, 2, 0}).to(at::kFloat)) * scale;
    if (options.logit_softcap > 0) scores = at::tanh(scores / options.logit_softcap) * options.logit_softcap;
    // Causal mask: query i (position cached + i) sees keys [0, cached + i]
    // (with a window W: [cached + i - W + 1, cached + i]).
    at::Tensor qpos = at::arange(q_len, long_opts).unsqueeze(1) + cached;  // [q_len, 1]
    at::Tensor masked = pos.unsqueeze(0) > qpos;                           // [q_len, context]
    if (options.sliding_window > 0) masked = masked.logical_or(pos.unsqueeze(0) <= qpos - options.sliding_window);
    scores.masked_fill_(masked, -std::numeric_limits<float>::infinity());
    at::Tensor probs = at::softmax(scores, -1);                          // [heads, q_len, context]
    at::Tensor o = at::matmul(probs, v.transpose(0, 1).to(at::kFloat));  // [heads, q_len, d]
    out.narrow(0, q_begin, q_len).copy_(o.transpose(0, 1));
  }
  return out;
}

}  // namespace nnsight::kernels
