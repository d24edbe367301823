// Paged attention for prefill and mixed steps on CUDA through the varlen
// flash attention inside every CUDA LibTorch (flash-attn 2's
// mha_varlen_fwd, reached as at::_flash_attention_forward): no padding.
//
// The step's keys and values are gathered from the paged cache, each
// sequence's context in order, into [total_keys, kv_heads, head_dim]
// (gather_context: a handful of index ops, no host synchronization), and one
// call attends every sequence's queries, as the flat batch holds them
// ([num_tokens, heads, head_dim], rows [query_start[s], query_start[s+1])),
// to its own keys: causal aligned to the bottom right (query i of sequence s
// sits at position cached(s) + i), the sliding window W as flash's left
// window W - 1, grouped-query heads natively. Where paged_attention_batched
// pads every sequence's queries to the longest and its keys to the longest
// context (a step mixing one 2k-token prefill with 64 decodes: 65 x 2048
// query rows), this reads each key once.
//
// Applies to bfloat16 and float16 with head_dim a multiple of 8 up to 256
// and no softcap (flash has none here); elsewhere the padded path. If
// LibTorch refuses (a GPU older than sm80, a build without flash) the
// process remembers it and takes the padded path from then on.
// NNSIGHT_FLASH_ATTENTION=0 in the environment (or UseFlashAttention(false))
// switches it off.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

#include "batching/batch_meta.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"

namespace nnsight::kernels {

// Whether paged_attention_flash takes this call.
bool flash_attention_applies(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                             const AttentionOptions& options);

// q: [num_tokens, num_heads, head_dim] -> [num_tokens, num_heads, head_dim];
// the cache already holds this step's keys and values (write_kv). A call
// LibTorch refuses is answered by the padded path (and all later ones).
at::Tensor paged_attention_flash(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                 double scale, const AttentionOptions& options = {});

// Every sequence's keys and values, positions 0 .. context_len - 1 in order,
// one sequence after another: {keys, values} [total, kv_heads, head_dim] and
// cu_keys int32 [num_seqs + 1] (sequence s owns rows [cu_keys[s], cu_keys[s+1])).
std::tuple<at::Tensor, at::Tensor, at::Tensor> gather_context(const KVCache& cache, const batching::BatchMeta& meta);

// Turns the flash path off (or on) for its lifetime, process-wide (tests, benches).
class UseFlashAttention {
 public:
  explicit UseFlashAttention(bool on);
  ~UseFlashAttention();
  UseFlashAttention(const UseFlashAttention&) = delete;
  UseFlashAttention& operator=(const UseFlashAttention&) = delete;

 private:
  int before_;
};

// Calls the flash path took, process-wide (tests check it was used).
int64_t flash_attention_calls();

}  // namespace nnsight::kernels
