#include "core/kernels/eager_attention.h"

#include <ATen/ATen.h>

#include <limits>

namespace nnsight::kernels {

SequenceKV sequence_kv(const KVCache& cache, const batching::BatchMeta& meta, int64_t s) {
  const int64_t kvh = cache.num_kv_heads(), d = cache.head_dim(), bs = cache.block_size();
  const int64_t context = meta.context_lens_host[s];
  auto long_opts = at::TensorOptions().dtype(at::kLong).device(cache.key.device());
  at::Tensor pos = at::arange(context, long_opts);  // [context]
  at::Tensor blocks = meta.block_tables[s].to(long_opts).index_select(0, pos.div(bs, "floor"));
  at::Tensor slots = blocks * bs + pos.remainder(bs);
  return SequenceKV{cache.key.view({-1, kvh, d}).index_select(0, slots).to(at::kFloat),
                    cache.value.view({-1, kvh, d}).index_select(0, slots).to(at::kFloat)};
}

namespace {
// [context, kv_heads, d] -> [heads, context, d]: each query head's KV head.
at::Tensor per_query_head(const at::Tensor& x, int64_t heads) {
  at::Tensor t = x.transpose(0, 1);  // [kv_heads, context, d]
  const int64_t group = heads / x.size(1);
  return group > 1 ? t.repeat_interleave(group, 0) : t;
}
}  // namespace

at::Tensor sequence_scores(const at::Tensor& q, const SequenceKV& kv, const batching::BatchMeta& meta, int64_t s,
                           double scale, const AttentionOptions& options) {
  const int64_t heads = q.size(1);
  TORCH_CHECK(heads % kv.key.size(1) == 0, "sequence_scores: heads not a multiple of kv heads");
  const int64_t q_begin = meta.query_start_host[s], q_len = meta.query_len(s);
  const int64_t context = meta.context_lens_host[s], cached = context - q_len;
  at::Tensor qs = q.narrow(0, q_begin, q_len).transpose(0, 1).to(at::kFloat);                 // [heads, q, d]
  at::Tensor scores = at::matmul(qs, per_query_head(kv.key, heads).transpose(1, 2)) * scale;  // [heads, q, ctx]
  if (options.logit_softcap > 0) scores = at::tanh(scores / options.logit_softcap) * options.logit_softcap;
  // Query i (position cached + i) sees keys [0, cached + i]; with a window W,
  // [cached + i - W + 1, cached + i].
  auto long_opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  at::Tensor pos = at::arange(context, long_opts).unsqueeze(0);          // [1, ctx]
  at::Tensor qpos = at::arange(q_len, long_opts).unsqueeze(1) + cached;  // [q, 1]
  at::Tensor masked = pos > qpos;
  if (options.sliding_window > 0) masked = masked.logical_or(pos <= qpos - options.sliding_window);
  return scores.masked_fill_(masked, -std::numeric_limits<float>::infinity());
}

at::Tensor sequence_output(const at::Tensor& pattern, const SequenceKV& kv, at::ScalarType dtype) {
  const int64_t heads = pattern.size(0);
  at::Tensor o = at::matmul(pattern.to(at::kFloat), per_query_head(kv.value, heads));  // [heads, q, d]
  return o.transpose(0, 1).to(dtype);                                                  // [q, heads, d]
}

}  // namespace nnsight::kernels
