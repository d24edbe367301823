#include "core/kernels/paged_attention_batched.h"

#include <ATen/ATen.h>
#include <torch/csrc/api/include/torch/version.h>

#include <limits>

namespace nnsight::kernels {

at::Tensor paged_attention_batched(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                   double scale, const AttentionOptions& options) {
  const int64_t num_tokens = q.size(0), heads = q.size(1), d = q.size(2);
  const int64_t kvh = cache.num_kv_heads(), bs = cache.block_size();
  const int64_t seqs = meta.num_seqs, max_q = meta.max_query_len, max_ctx = meta.max_context_len;
  TORCH_CHECK(heads % kvh == 0, "paged_attention_batched: ", heads, " heads over ", kvh, " KV heads");
  if (num_tokens == 0 || seqs == 0) return at::empty_like(q);
  const int64_t group = heads / kvh;
  const auto long_opts = at::TensorOptions().dtype(at::kLong).device(q.device());

  at::Tensor starts = meta.query_start.to(at::kLong);           // [seqs + 1]
  at::Tensor first = starts.narrow(0, 0, seqs);                 // [seqs]
  at::Tensor q_len = starts.narrow(0, 1, seqs) - first;         // [seqs]
  at::Tensor cached = meta.context_lens.to(at::kLong) - q_len;  // [seqs]
  at::Tensor i = at::arange(max_q, long_opts);                  // [max_q]
  at::Tensor j = at::arange(max_ctx, long_opts);                // [max_ctx]

  // Queries, padded per sequence: row first[s] + i (clamped for padding rows).
  at::Tensor rows = (first.unsqueeze(1) + i).clamp_max(num_tokens - 1);  // [seqs, max_q]
  at::Tensor qp = q.index_select(0, rows.view(-1)).view({seqs, max_q, heads, d}).transpose(1, 2);
  // [seqs, heads, max_q, d]

  // Keys and values through the block tables: key position j of sequence s
  // is slot block_tables[s][j / bs] * bs + j % bs (beyond its context: some
  // slot, masked below).
  at::Tensor slots = meta.block_tables.to(at::kLong).index_select(1, j.div(bs, "floor")) * bs + j.remainder(bs);
  auto gather = [&](const at::Tensor& pages) {
    at::Tensor x = pages.view({-1, kvh, d}).index_select(0, slots.view(-1)).view({seqs, max_ctx, kvh, d});
    x = x.permute({0, 2, 1, 3}).to(q.scalar_type());  // [seqs, kv_heads, max_ctx, d]
    if (group > 1) x = x.unsqueeze(2).expand({seqs, kvh, group, max_ctx, d}).reshape({seqs, heads, max_ctx, d});
    return x;  // [seqs, heads, max_ctx, d]
  };
  at::Tensor k = gather(cache.key), v = gather(cache.value);

  // Query i of s (position cached[s] + i) sees keys [0, cached[s] + i], or
  // with a window W the last W of them; padding rows see every key (their
  // output is dropped; a row with no key would be NaN).
  at::Tensor q_pos = (cached.unsqueeze(1) + i).unsqueeze(2);  // [seqs, max_q, 1]
  at::Tensor key_pos = j.view({1, 1, max_ctx});
  at::Tensor allowed = key_pos <= q_pos;  // [seqs, max_q, max_ctx]
  if (options.sliding_window > 0) allowed = allowed.logical_and(key_pos > q_pos - options.sliding_window);
  allowed = allowed.logical_or((i.unsqueeze(0) >= q_len.unsqueeze(1)).unsqueeze(2)).unsqueeze(1);
  // [seqs, 1, max_q, max_ctx]

  at::Tensor o;  // [seqs, heads, max_q, d]
#if TORCH_VERSION_MAJOR >= 2
  if (options.logit_softcap == 0 && q.is_cuda()) {
    // LibTorch's fused attention (memory-efficient kernel: it takes a mask).
    o = at::scaled_dot_product_attention(qp, k, v, allowed, 0.0, false, scale);
  }
#endif
  if (!o.defined()) {
    at::Tensor scores = at::matmul(qp.to(at::kFloat), k.to(at::kFloat).transpose(2, 3)) * scale;
    if (options.logit_softcap > 0) scores = at::tanh(scores / options.logit_softcap) * options.logit_softcap;
    scores.masked_fill_(allowed.logical_not(), -std::numeric_limits<float>::infinity());
    o = at::matmul(at::softmax(scores, -1), v.to(at::kFloat));  // [seqs, heads, max_q, d]
  }

  // Back to the flat rows: token t of sequence s is padded row s * max_q + (t - first[s]).
  at::Tensor t = at::arange(num_tokens, long_opts);
  at::Tensor seq_of = at::searchsorted(starts, t, /*out_int32=*/false, /*right=*/true) - 1;  // [num_tokens]
  at::Tensor padded_row = seq_of * max_q + (t - first.index_select(0, seq_of));
  return o.transpose(1, 2).reshape({seqs * max_q, heads, d}).index_select(0, padded_row).to(q.scalar_type());
}

}  // namespace nnsight::kernels
