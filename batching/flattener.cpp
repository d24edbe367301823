#include "batching/flattener.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace nnsight::batching {

Flattener::Flattener(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq, int64_t block_size)
    : block_size_(block_size) {
  if (block_size <= 0) throw std::invalid_argument("Flattener: block_size must be positive");
  auto i64 = at::TensorOptions().dtype(at::kLong);
  auto i32 = at::TensorOptions().dtype(at::kInt);
  tokens_ = at::zeros({max_tokens}, i64);
  positions_ = at::zeros({max_tokens}, i64);
  slots_ = at::zeros({max_tokens}, i64);
  query_start_ = at::zeros({max_seqs + 1}, i32);
  context_lens_ = at::zeros({max_seqs}, i32);
  block_tables_ = at::zeros({max_seqs, std::max<int64_t>(max_blocks_per_seq, 1)}, i32);
  logits_rows_ = at::zeros({max_seqs}, i64);
  batch_.meta.block_size = block_size;
  batch_.meta.query_start_host.reserve(static_cast<size_t>(max_seqs + 1));
  batch_.meta.context_lens_host.reserve(static_cast<size_t>(max_seqs));
  batch_.groups.reserve(static_cast<size_t>(max_seqs));
}

const FlatBatch& Flattener::flatten(const std::vector<const SeqSlot*>& slots) {
  const int64_t num_seqs = static_cast<int64_t>(slots.size());
  const int64_t max_blocks = block_tables_.size(1);
  if (num_seqs > context_lens_.size(0)) {
    throw std::invalid_argument("Flattener: " + std::to_string(num_seqs) + " sequences exceed the " +
                                std::to_string(context_lens_.size(0)) + " it was sized for");
  }
  auto* tok = tokens_.data_ptr<int64_t>();
  auto* pos = positions_.data_ptr<int64_t>();
  auto* slot = slots_.data_ptr<int64_t>();
  auto* qs = query_start_.data_ptr<int32_t>();
  auto* cl = context_lens_.data_ptr<int32_t>();
  auto* bt = block_tables_.data_ptr<int32_t>();
  auto* lr = logits_rows_.data_ptr<int64_t>();
  BatchMeta& meta = batch_.meta;
  BatchGroups& groups = batch_.groups;
  groups.clear();
  meta.query_start_host.assign(1, 0);
  meta.context_lens_host.clear();
  int64_t row = 0, num_logits = 0, max_q = 0, max_ctx = 0;
  qs[0] = 0;
  for (int64_t s = 0; s < num_seqs; ++s) {
    const SeqSlot& r = *slots[static_cast<size_t>(s)];
    const int64_t n = r.num_new();
    const int64_t ctx = r.context_len();
    if (row + n > tokens_.size(0)) {
      throw std::invalid_argument("Flattener: " + std::to_string(row + n) + " tokens exceed the " +
                                  std::to_string(tokens_.size(0)) + " it was sized for");
    }
    const int64_t nb = static_cast<int64_t>(r.block_table.size());
    if (nb > max_blocks || nb * block_size_ < ctx) {
      throw std::invalid_argument("Flattener: sequence " + std::to_string(s) + " (request " + std::to_string(r.id) +
                                  ") needs " + std::to_string(ctx) + " cache slots; its block table has " +
                                  std::to_string(nb) + " blocks of " + std::to_string(block_size_) + " (at most " +
                                  std::to_string(max_blocks) + " blocks)");
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = r.num_computed + i;
      tok[row + i] = r.token_ids[static_cast<size_t>(i)];
      pos[row + i] = p;
      slot[row + i] =
          static_cast<int64_t>(r.block_table[static_cast<size_t>(p / block_size_)]) * block_size_ + p % block_size_;
    }
    std::copy(r.block_table.begin(), r.block_table.end(), bt + s * max_blocks);
    std::fill(bt + s * max_blocks + nb, bt + (s + 1) * max_blocks, 0);
    BatchGroup g{r.id, row, n, r.num_computed, -1, r.num_generated, r.recompute};
    row += n;
    qs[s + 1] = static_cast<int32_t>(row);
    cl[s] = static_cast<int32_t>(ctx);
    meta.query_start_host.push_back(static_cast<int32_t>(row));
    meta.context_lens_host.push_back(cl[s]);
    if (r.sample && n > 0) {
      g.sample_row = num_logits;
      lr[num_logits++] = row - 1;
    }
    max_q = std::max(max_q, n);
    max_ctx = std::max(max_ctx, ctx);
    groups.add(g);
  }
  batch_.token_ids = tokens_.narrow(0, 0, row);
  meta.positions = positions_.narrow(0, 0, row);
  meta.slot_mapping = slots_.narrow(0, 0, row);
  meta.query_start = query_start_.narrow(0, 0, num_seqs + 1);
  meta.context_lens = context_lens_.narrow(0, 0, num_seqs);
  meta.block_tables = block_tables_.narrow(0, 0, num_seqs);
  meta.logits_rows = logits_rows_.narrow(0, 0, num_logits);
  meta.num_tokens = row;
  meta.num_seqs = num_seqs;
  meta.max_query_len = max_q;
  meta.max_context_len = max_ctx;
  return batch_;
}

FlatBatch flatten_slots(const std::vector<SeqSlot>& slots, int64_t block_size) {
  int64_t tokens = 0;
  size_t blocks = 1;
  std::vector<const SeqSlot*> ptrs;
  ptrs.reserve(slots.size());
  for (const auto& s : slots) {
    tokens += s.num_new();
    blocks = std::max(blocks, s.block_table.size());
    ptrs.push_back(&s);
  }
  Flattener f(tokens, static_cast<int64_t>(slots.size()), static_cast<int64_t>(blocks), block_size);
  return f.flatten(ptrs);
}

}  // namespace nnsight::batching
