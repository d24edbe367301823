// Paged causal attention over a flat token batch.
//
// Every query row t of sequence s sits at position p = cached_len(s) + i and
// attends to that sequence's keys at positions [0, p] (or, with a sliding
// window W, [max(0, p - W + 1), p]: W keys, itself included, as Hugging
// Face's masks do), which live in the paged KV cache at the slots its block
// table names. Grouped-query attention: head h reads KV head
// h / (num_heads / num_kv_heads).
#pragma once

#include <ATen/core/Tensor.h>

#include "batching/batch_meta.h"
#include "core/kv_cache.h"

namespace nnsight::kernels {

// Per-layer variations of the softmax attention.
struct AttentionOptions {
  int64_t sliding_window = 0;  // keys within this many positions (itself included); 0 = all
  double logit_softcap = 0.0;  // scores -> cap * tanh(scores / cap) before the softmax; 0 = off
};

// Stores this step's keys and values at meta.slot_mapping.
//   k, v: [num_tokens, num_kv_heads, head_dim]
void write_kv(KVCache& cache, const at::Tensor& k, const at::Tensor& v, const batching::BatchMeta& meta);

// q: [num_tokens, num_heads, head_dim] -> [num_tokens, num_heads, head_dim].
// The cache must already hold this step's keys and values (write_kv).
// Dispatches to a fused CPU kernel, or to the device-generic path elsewhere.
at::Tensor paged_attention(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta, double scale,
                           const AttentionOptions& options = {});

// This step's attention in one call: write_kv(cache, k, v, meta), then
// paged_attention(q, ...). In a gradient forward (q, k or v requires grad)
// the call is recorded for autograd (kernel_gradients.h).
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, KVCache& cache,
                  const batching::BatchMeta& meta, double scale, const AttentionOptions& options = {});

// Device-generic implementation from ATen ops (one gather + matmul per
// sequence). Used on CUDA and as a cross-check of the CPU kernel in tests.
at::Tensor paged_attention_generic(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                   double scale, const AttentionOptions& options = {});

}  // namespace nnsight::kernels
