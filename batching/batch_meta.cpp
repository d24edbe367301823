#include "batching/batch_meta.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace nnsight::batching {

BatchMeta BatchMeta::to(const at::Device& device) const {
  BatchMeta m = *this;
  if (positions.defined() && positions.device() == device) return m;
  auto mv = [&](const at::Tensor& t) { return t.defined() ? t.to(device, /*non_blocking=*/true) : t; };
  m.positions = mv(positions);
  m.slot_mapping = mv(slot_mapping);
  m.query_start = mv(query_start);
  m.context_lens = mv(context_lens);
  m.block_tables = mv(block_tables);
  m.logits_rows = mv(logits_rows);
  return m;
}

BatchMeta build_batch_meta(const std::vector<SeqSlot>& seqs, int64_t block_size) {
  if (block_size <= 0) throw std::invalid_argument("build_batch_meta: block_size must be positive");
  BatchMeta m;
  m.block_size = block_size;
  m.num_seqs = static_cast<int64_t>(seqs.size());
  int64_t total = 0;
  size_t max_blocks = 1;
  for (const auto& s : seqs) {
    total += s.new_len;
    max_blocks = std::max(max_blocks, s.block_table.size());
  }
  m.num_tokens = total;
  auto i64 = at::TensorOptions().dtype(at::kLong);
  auto i32 = at::TensorOptions().dtype(at::kInt);
  m.positions = at::empty({total}, i64);
  m.slot_mapping = at::empty({total}, i64);
  m.query_start = at::empty({m.num_seqs + 1}, i32);
  m.context_lens = at::empty({m.num_seqs}, i32);
  m.block_tables = at::zeros({m.num_seqs, static_cast<int64_t>(max_blocks)}, i32);
  auto* pos = m.positions.data_ptr<int64_t>();
  auto* slot = m.slot_mapping.data_ptr<int64_t>();
  auto* qs = m.query_start.data_ptr<int32_t>();
  auto* cl = m.context_lens.data_ptr<int32_t>();
  auto* bt = m.block_tables.data_ptr<int32_t>();
  std::vector<int64_t> logits_rows;
  int64_t row = 0;
  qs[0] = 0;
  for (int64_t s = 0; s < m.num_seqs; ++s) {
    const auto& seq = seqs[static_cast<size_t>(s)];
    int64_t ctx = seq.cached_len + seq.new_len;
    if (static_cast<int64_t>(seq.block_table.size()) * block_size < ctx) {
      throw std::invalid_argument("build_batch_meta: sequence " + std::to_string(s) + " needs " +
                                  std::to_string(ctx) + " slots but its block table holds " +
                                  std::to_string(seq.block_table.size() * block_size));
    }
    for (int64_t i = 0; i < seq.new_len; ++i) {
      int64_t p = seq.cached_len + i;
      pos[row + i] = p;
      slot[row + i] = static_cast<int64_t>(seq.block_table[static_cast<size_t>(p / block_size)]) * block_size +
                      p % block_size;
    }
    std::copy(seq.block_table.begin(), seq.block_table.end(), bt + s * static_cast<int64_t>(max_blocks));
    row += seq.new_len;
    qs[s + 1] = static_cast<int32_t>(row);
    cl[s] = static_cast<int32_t>(ctx);
    if (seq.wants_logits && seq.new_len > 0) logits_rows.push_back(row - 1);
    m.max_query_len = std::max(m.max_query_len, seq.new_len);
    m.max_context_len = std::max(m.max_context_len, ctx);
  }
  m.logits_rows = at::tensor(logits_rows, i64);
  m.query_start_host.assign(qs, qs + m.num_seqs + 1);
  m.context_lens_host.assign(cl, cl + m.num_seqs);
  return m;
}

}  // namespace nnsight::batching
