#include "support/paged_stepper.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <numeric>

#include "batching/flattener.h"
#include "support/seq_slots.h"

namespace nnsight::testing {

PagedStepper::PagedStepper(CausalLM& model, size_t num_seqs, int64_t block_size, int64_t num_blocks)
    : model_(model), block_size_(block_size), cached_(num_seqs, 0), blocks_(num_seqs) {
  kv_ = allocate_kv_caches(model.num_layers(), num_blocks, block_size, model.local_kv_heads(), model.head_dim(),
                           model.options());
  free_.resize(static_cast<size_t>(num_blocks));
  std::iota(free_.rbegin(), free_.rend(), 0);
}

std::vector<at::Tensor> PagedStepper::step(const std::vector<std::vector<int64_t>>& tokens,
                                           const std::vector<size_t>& order) {
  std::vector<batching::SeqSlot> slots;
  std::vector<int64_t> ids;
  std::vector<size_t> scheduled;
  for (size_t i : order) {
    if (tokens[i].empty()) continue;
    const int64_t n = static_cast<int64_t>(tokens[i].size());
    while (static_cast<int64_t>(blocks_[i].size()) * block_size_ < cached_[i] + n) {
      blocks_[i].push_back(free_.back());
      free_.pop_back();
    }
    slots.push_back(seq_slot(cached_[i], std::vector<int32_t>(tokens[i].begin(), tokens[i].end()), blocks_[i]));
    ids.insert(ids.end(), tokens[i].begin(), tokens[i].end());
    cached_[i] += n;
    scheduled.push_back(i);
  }
  batching::FlatBatch batch = batching::flatten_slots(slots, block_size_);
  EXPECT_TRUE(batch.token_ids.equal(at::tensor(ids, at::kLong)));
  at::Tensor hidden = model_.forward(batch.token_ids, batch.meta, kv_);
  at::Tensor logits = model_.compute_logits(hidden, batch.meta.logits_rows);  // [scheduled, vocab]
  std::vector<at::Tensor> out(tokens.size());
  for (size_t r = 0; r < scheduled.size(); ++r) out[scheduled[r]] = logits[static_cast<int64_t>(r)].contiguous();
  return out;
}

}  // namespace nnsight::testing
