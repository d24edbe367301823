// Paged attention for the whole flat batch in a constant number of ATen
// calls: the device path (CUDA), where a host loop over the sequences would
// launch ~15 kernels per sequence per layer.
//
// Each sequence's queries are gathered into a padded [seqs, heads,
// max_query_len, head_dim] block and its keys/values, through its block
// table, into [seqs, heads, max_context_len, head_dim]; one masked attention
// over that (the causal mask bottom-right aligned: query i of sequence s sits
// at position cached_len(s) + i; the sliding window and softcap as in
// paged_attention.h), and the rows scattered back to [num_tokens, heads,
// head_dim]. Everything it reads of the batch is in BatchMeta's tensors, so
// it never synchronizes with the device. Padding costs work in a step that
// mixes one long prefill with many decodes (docs/design.md says why it is the
// first step and what replaces it).
#pragma once

#include <ATen/core/Tensor.h>

#include "batching/batch_meta.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"

namespace nnsight::kernels {

// q: [num_tokens, num_heads, head_dim] -> [num_tokens, num_heads, head_dim];
// the cache already holds this step's keys and values (write_kv).
at::Tensor paged_attention_batched(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                   double scale, const AttentionOptions& options = {});

}  // namespace nnsight::kernels
