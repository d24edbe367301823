#include "batching/flattener.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace nnsight::batching {

FlatBuffers::FlatBuffers(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq) {
  auto i64 = at::TensorOptions().dtype(at::kLong);
  auto i32 = at::TensorOptions().dtype(at::kInt);
  tokens = at::zeros({max_tokens}, i64);
  positions = at::zeros({max_tokens}, i64);
  slots = at::zeros({max_tokens}, i64);
  query_start = at::zeros({max_seqs + 1}, i32);
  context_lens = at::zeros({max_seqs}, i32);
  block_tables = at::zeros({max_seqs, std::max<int64_t>(max_blocks_per_seq, 1)}, i32);
  logits_rows = at::zeros({max_seqs}, i64);
}

void FlatBuffers::view(FlatBatch& batch, int64_t num_tokens, int64_t num_seqs, int64_t num_logits) const {
  BatchMeta& meta = batch.meta;
  batch.token_ids = tokens.narrow(0, 0, num_tokens);
  meta.positions = positions.narrow(0, 0, num_tokens);
  meta.slot_mapping = slots.narrow(0, 0, num_tokens);
  meta.query_start = query_start.narrow(0, 0, num_seqs + 1);
  meta.context_lens = context_lens.narrow(0, 0, num_seqs);
  meta.block_tables = block_tables.narrow(0, 0, num_seqs);
  meta.logits_rows = logits_rows.narrow(0, 0, num_logits);
  meta.num_tokens = num_tokens;
  meta.num_seqs = num_seqs;
}

FlatBuffers::Data FlatBuffers::data() const {
  return {tokens.data_ptr<int64_t>(),      positions.data_ptr<int64_t>(),   slots.data_ptr<int64_t>(),
          logits_rows.data_ptr<int64_t>(), query_start.data_ptr<int32_t>(), context_lens.data_ptr<int32_t>(),
          block_tables.data_ptr<int32_t>()};
}

Flattener::Flattener(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq, int64_t block_size)
    : block_size_(block_size), buf_(max_tokens, max_seqs, max_blocks_per_seq) {
  if (block_size <= 0) throw std::invalid_argument("Flattener: block_size must be positive");
  batch_.meta.block_size = block_size;
  batch_.meta.query_start_host.reserve(static_cast<size_t>(max_seqs + 1));
  batch_.meta.context_lens_host.reserve(static_cast<size_t>(max_seqs));
  batch_.groups.reserve(static_cast<size_t>(max_seqs));
}

const FlatBatch& Flattener::flatten(const std::vector<const SeqSlot*>& slots) {
  const int64_t num_seqs = static_cast<int64_t>(slots.size());
  const int64_t max_blocks = buf_.block_tables.size(1);
  if (num_seqs > buf_.context_lens.size(0)) {
    throw std::invalid_argument("Flattener: " + std::to_string(num_seqs) + " sequences exceed the " +
                                std::to_string(buf_.context_lens.size(0)) + " it was sized for");
  }
  const FlatBuffers::Data d = buf_.data();
  int64_t *tok = d.tokens, *pos = d.positions, *slot = d.slots, *lr = d.logits_rows;
  int32_t *qs = d.query_start, *cl = d.context_lens, *bt = d.block_tables;
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
    if (row + n > buf_.tokens.size(0)) {
      throw std::invalid_argument("Flattener: " + std::to_string(row + n) + " tokens exceed the " +
                                  std::to_string(buf_.tokens.size(0)) + " it was sized for");
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
  buf_.view(batch_, row, num_seqs, num_logits);
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
