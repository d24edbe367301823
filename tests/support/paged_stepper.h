// Sequences stepping through a model's forward with their own blocks of one
// paged KV cache, flattened by batching::flatten_slots: what the batch
// invariance tests need to run a sequence alone or beside others.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "core/kv_cache.h"
#include "models/causal_lm.h"
#include "support/bitwise_equal.h"

namespace nnsight::testing {

class PagedStepper {
 public:
  PagedStepper(CausalLM& model, size_t num_seqs, int64_t block_size, int64_t num_blocks);

  // Computes `tokens[i]` (new tokens, empty = not scheduled) for each sequence
  // in the order given by `order`; returns each scheduled sequence's logits
  // for its last new token, [vocab] float32, by sequence index.
  std::vector<at::Tensor> step(const std::vector<std::vector<int64_t>>& tokens, const std::vector<size_t>& order);

 private:
  CausalLM& model_;
  int64_t block_size_;
  std::vector<int64_t> cached_;
  std::vector<std::vector<int32_t>> blocks_;
  std::vector<KVCache> kv_;
  std::vector<int32_t> free_;
};

}  // namespace nnsight::testing
