// The internal points of one attention module (TransformerLens's hook points
// under Hugging Face's module paths), registered as HookPoint children of it:
//
//   q        [T, heads, head_dim]     queries after q/k norms and rotary
//   k, v     [T, kv_heads, head_dim]  keys after norms and rotary; values
//   scores   [heads, query, key]      per sequence: the softmax's input (scaled,
//                                     soft-capped, masked with -inf)
//   pattern  [heads, query, key]      per sequence: the probabilities
//   z        [T, heads, head_dim]     each head's output before the output projection
//
// q, k, v and z are values the fused path has anyway: a hook costs nothing
// more. scores and pattern exist only for the sequences a trace watches
// (HookPoint::watched): their rows are recomputed as eager attention
// (kernels/eager_attention.h) from the step's q and the sequence's cache
// after the fused kernel ran for the whole batch, so what a hook writes into
// them changes that sequence's output exactly as it would in Hugging Face's
// eager attention. Under tensor parallelism each rank holds its heads; the
// interleaver gathers them whole for reading and re-shards writes.
#pragma once

#include <memory>

#include "batching/batch_meta.h"
#include "core/hook_point.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"
#include "tp/process_group.h"
#include "tp/shard_layout.h"

namespace nnsight {

class AttentionPoints {
 public:
  // Registers the points under `owner`: `heads` and `kv_heads` are the head
  // layouts over the ranks, `head_dim` each head's size.
  AttentionPoints(Module& owner, const tp::ParallelContext& ctx, const tp::ShardLayout& heads,
                  const tp::ShardLayout& kv_heads, int64_t head_dim);

  // Rotated q [T, heads, d], k and v [T, kv_heads, d] -> each head's output
  // [T, heads, d] (as z's hooks leave it): q, k, v pass their points, the
  // step's keys and values go to the cache, the fused kernel attends, and
  // the watched sequences' rows are recomputed through scores and pattern.
  at::Tensor attend(at::Tensor q, at::Tensor k, at::Tensor v, KVCache& cache, const batching::BatchMeta& meta,
                    double scale, const kernels::AttentionOptions& options);

  std::shared_ptr<HookPoint> q, k, v, scores, pattern, z;
};

}  // namespace nnsight
