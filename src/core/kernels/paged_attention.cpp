#include "core/kernels/paged_attention.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/kernels/call_successors.h"
#include "core/kernels/kernel_gradients.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/row_ops.h"
#include "core/kernels/undispatched.h"

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
    return t.device().is_cpu() && c.device().is_cpu() && t.scalar_type() == c.scalar_type() && t.is_contiguous() &&
           c.is_contiguous() && t.numel() == t.size(0) * kvh * d;
  };
  if (meta.slot_mapping.device().is_cpu() && meta.slot_mapping.scalar_type() == at::kLong &&
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

// Bytes of keys and values a chunk asks for ahead, within L2 (1-2 MiB per
// core on the machines measured).
constexpr int64_t kPrefetchBytes = int64_t(256) << 10;

// One (sequence, head) pair per work item; each query row of that sequence
// is computed with a two-pass softmax in float, whatever the storage dtype.
// Per query row the order of every reduction depends only on head_dim and on
// the row's own keys (positions 0..p in order), so a token's output does not
// depend on which other sequences or tokens share the batch.
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
  const RowType row_type = std::is_same_v<scalar_t, float> ? RowType::F32 : RowType::BF16;

  // The rows of (sequence s, KV head g) its queries read, into L2: [first
  // key of the earliest query, context).
  const auto prefetch_rows = [&](int64_t s, int64_t g, int64_t& budget) {
    const int64_t q_len = qs[s + 1] - qs[s], context = ctx[s];
    const int64_t first = window > 0 ? std::max<int64_t>(0, context - q_len - window + 1) : 0;
    const int64_t row_bytes = d * static_cast<int64_t>(sizeof(scalar_t));
    for (int64_t j = first; j < context && budget > 0; ++j, budget -= 2 * row_bytes) {
      const int64_t slot = static_cast<int64_t>(bt[s * bt_stride + j / bs]) * bs + j % bs;
      const char* k = reinterpret_cast<const char*>(kp + (slot * kvh + g) * d);
      const char* v = reinterpret_cast<const char*>(vp + (slot * kvh + g) * d);
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

  kernels::parallel_for_then_warm(0, num_seqs * num_heads, 1, next, [&](int64_t begin, int64_t end) {
    // Every key and value row the chunk reads is asked for first (up to
    // kPrefetchBytes): the weights streamed between two layers' attention
    // push the cache out of L3, and one head's loop alone keeps too few reads
    // in flight to hide the memory's latency. A decode step's attention at
    // 128-160 keys, two threads: 25.0-25.3 -> 19.6-20.3 us per layer in
    // minutes when other tenants loaded the machine (and its memory), 15.6
    // either way in quiet ones.
    {
      int64_t budget = kPrefetchBytes, last_s = -1, last_g = -1;
      for (int64_t item = begin; item < end && budget > 0; ++item) {
        const int64_t s = item / num_heads, g = item % num_heads / group;
        if (s == last_s && g == last_g) continue;
        prefetch_rows(s, g, budget);
        last_s = s;
        last_g = g;
      }
    }
    // Scratch kept by each thread across calls (query row, scores, output
    // row, key/value row pointers): at one token a layer's attention is a few
    // microseconds, and five fresh vectors per chunk were a visible part.
    thread_local std::vector<float> qf, acc, scores;
    thread_local std::vector<const void*> krows, vrows;
    qf.resize(static_cast<size_t>(d));
    acc.resize(static_cast<size_t>(d));
    int64_t resolved_s = -1, resolved_g = -1;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t s = item / num_heads, h = item % num_heads, g = h / group;
      const int64_t q_begin = qs[s], q_len = qs[s + 1] - qs[s], context = ctx[s];
      if (q_len == 0) continue;
      const int64_t cached = context - q_len;
      // Resolve the sequence's key/value rows for this KV head once (the
      // heads of a group come one after another).
      if (s != resolved_s || g != resolved_g) {
        krows.resize(static_cast<size_t>(context));
        vrows.resize(static_cast<size_t>(context));
        for (int64_t j = 0; j < context; ++j) {
          const int64_t slot = static_cast<int64_t>(bt[s * bt_stride + j / bs]) * bs + j % bs;
          krows[j] = kp + (slot * kvh + g) * d;
          vrows[j] = vp + (slot * kvh + g) * d;
        }
        resolved_s = s;
        resolved_g = g;
      }
      scores.resize(static_cast<size_t>(context));
      for (int64_t i = 0; i < q_len; ++i) {
        const int64_t t = q_begin + i;
        // causal: positions [first, p], first = 0 without a window
        const int64_t p = cached + i;
        const int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
        const int64_t n_keys = p + 1 - first;
        const void* const* kr = krows.data() + first;
        const void* const* vr = vrows.data() + first;
        const scalar_t* qrow = qp + (t * num_heads + h) * d;
        for (int64_t x = 0; x < d; ++x) qf[x] = static_cast<float>(qrow[x]) * scale;
        if constexpr (kVectorRows<scalar_t>) {
          dot_rows(qf.data(), kr, row_type, n_keys, d, scores.data());
        } else {
          for (int64_t j = 0; j < n_keys; ++j) {
            const scalar_t* krow = static_cast<const scalar_t*>(kr[j]);
            float dot = 0.f;
            for (int64_t x = 0; x < d; ++x) dot += qf[x] * static_cast<float>(krow[x]);
            scores[j] = dot;
          }
        }
        if (cap > 0.f) {
          for (int64_t j = 0; j < n_keys; ++j) scores[j] = cap * std::tanh(scores[j] / cap);
        }
        const float sum = exp_shifted_sum(scores.data(), n_keys);
        std::fill(acc.begin(), acc.end(), 0.f);
        if constexpr (kVectorRows<scalar_t>) {
          axpy_rows(scores.data(), vr, row_type, n_keys, d, acc.data());
        } else {
          for (int64_t j = 0; j < n_keys; ++j) {
            const float w = scores[j];
            const scalar_t* vrow = static_cast<const scalar_t*>(vr[j]);
            for (int64_t x = 0; x < d; ++x) acc[x] += w * static_cast<float>(vrow[x]);
          }
        }
        const float inv = 1.f / sum;
        scalar_t* orow = op + (t * num_heads + h) * d;
        for (int64_t x = 0; x < d; ++x) orow[x] = static_cast<scalar_t>(acc[x] * inv);
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
  if (!q.device().is_cpu()) return paged_attention_generic(q, cache, meta, scale, options);
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
