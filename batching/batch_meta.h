// BatchMeta: the one metadata struct every layer receives for a flat token
// batch. Many sequences' new tokens are concatenated into [num_tokens]; this
// struct says which rows belong to which sequence, where each sits in its
// sequence, and where its keys/values live in the paged KV cache.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace nnsight::batching {

struct BatchMeta {
  // ---- per token, [num_tokens]
  at::Tensor positions;     // int64: position of each token in its sequence
  at::Tensor slot_mapping;  // int64: flat KV-cache slot (block * block_size + offset) it writes

  // ---- per sequence, [num_seqs] (query_start is [num_seqs + 1])
  at::Tensor query_start;   // int32: sequence s owns rows [query_start[s], query_start[s+1])
  at::Tensor context_lens;  // int32: tokens of s in the cache after this step (cached + new)
  at::Tensor block_tables;  // int32 [num_seqs, max_blocks]: cache blocks of s, in order; 0-padded

  // ---- rows whose logits are computed this step (usually each sampling sequence's last row)
  at::Tensor logits_rows;  // int64 [num_logits]

  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  int64_t max_query_len = 0;
  int64_t max_context_len = 0;
  int64_t block_size = 0;

  // Host copies of query_start / context_lens (identical data) for loops that
  // must not synchronize with a device.
  std::vector<int32_t> query_start_host;
  std::vector<int32_t> context_lens_host;

  int64_t query_len(int64_t s) const { return query_start_host[s + 1] - query_start_host[s]; }
  // Tokens of sequence s already in the cache before this step.
  int64_t cached_len(int64_t s) const { return context_lens_host[s] - query_len(s); }

  // Moves the tensors to `device` (host copies stay).
  BatchMeta to(const at::Device& device) const;
  // Fresh copies of the tensors (the flattener's are views of buffers it reuses).
  BatchMeta clone() const;
};

}  // namespace nnsight::batching
