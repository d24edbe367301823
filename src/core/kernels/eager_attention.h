// One sequence's attention as plain tensors (Hugging Face's eager
// attention), for the rows whose pattern a trace watches: the fused paged
// kernel never forms the scores or the probabilities, so these recompute
// them from the step's q and the sequence's cached keys and values.
//
//   scores  = q . k^T * scale, soft-capped (cap * tanh(s / cap)), with the
//             causal / sliding-window mask as -inf: the softmax's input
//   pattern = softmax(scores) over the keys
//   output  = pattern . v
// Grouped-query attention: query head h reads KV head h / (heads / kv_heads).
// Everything is computed in float32 whatever the cache's dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "batching/batch_meta.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"

namespace nnsight::kernels {

// Sequence s's keys and values, [context, kv_heads, head_dim] each, float32,
// read from the cache (which must hold this step's keys: write_kv).
struct SequenceKV {
  at::Tensor key;
  at::Tensor value;
};
SequenceKV sequence_kv(const KVCache& cache, const batching::BatchMeta& meta, int64_t s);

// q: the step's [T, heads, head_dim]; -> float32 [heads, query_len(s), context_lens[s]].
at::Tensor sequence_scores(const at::Tensor& q, const SequenceKV& kv, const batching::BatchMeta& meta, int64_t s,
                           double scale, const AttentionOptions& options);

// pattern [heads, query, context] (float32) . v -> [query, heads, head_dim] in `dtype`.
at::Tensor sequence_output(const at::Tensor& pattern, const SequenceKV& kv, at::ScalarType dtype);

}  // namespace nnsight::kernels
