#include "runner/input_batch.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace nnsight::runner {

InputBatch::InputBatch(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq, int64_t block_size)
    : block_size_(block_size) {
  auto i64 = at::TensorOptions().dtype(at::kLong);
  auto i32 = at::TensorOptions().dtype(at::kInt);
  tokens_ = at::zeros({max_tokens}, i64);
  positions_ = at::zeros({max_tokens}, i64);
  slots_ = at::zeros({max_tokens}, i64);
  query_start_ = at::zeros({max_seqs + 1}, i32);
  context_lens_ = at::zeros({max_seqs}, i32);
  block_tables_ = at::zeros({max_seqs, max_blocks_per_seq}, i32);
  logits_rows_ = at::zeros({max_seqs}, i64);
  meta_.block_size = block_size;
  meta_.query_start_host.reserve(static_cast<size_t>(max_seqs + 1));
  meta_.context_lens_host.reserve(static_cast<size_t>(max_seqs));
}

void InputBatch::prepare(const std::vector<const ScheduledRequest*>& scheduled, std::vector<StepRequest>& requests) {
  const int64_t num_seqs = static_cast<int64_t>(scheduled.size());
  const int64_t max_blocks = block_tables_.size(1);
  TORCH_CHECK(num_seqs <= context_lens_.size(0), "InputBatch: more sequences than max_num_seqs");
  auto* tok = tokens_.data_ptr<int64_t>();
  auto* pos = positions_.data_ptr<int64_t>();
  auto* slot = slots_.data_ptr<int64_t>();
  auto* qs = query_start_.data_ptr<int32_t>();
  auto* cl = context_lens_.data_ptr<int32_t>();
  auto* bt = block_tables_.data_ptr<int32_t>();
  auto* lr = logits_rows_.data_ptr<int64_t>();
  requests.clear();
  meta_.query_start_host.assign(1, 0);
  meta_.context_lens_host.clear();
  int64_t row = 0, num_logits = 0, max_q = 0, max_ctx = 0;
  qs[0] = 0;
  for (int64_t s = 0; s < num_seqs; ++s) {
    const ScheduledRequest& r = *scheduled[static_cast<size_t>(s)];
    const int64_t n = static_cast<int64_t>(r.token_ids.size());
    TORCH_CHECK(row + n <= tokens_.size(0), "InputBatch: more tokens than max_num_batched_tokens");
    TORCH_CHECK(static_cast<int64_t>(r.block_table.size()) <= max_blocks, "InputBatch: block table too long");
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = r.num_computed + i;
      tok[row + i] = r.token_ids[static_cast<size_t>(i)];
      pos[row + i] = p;
      slot[row + i] = static_cast<int64_t>(r.block_table[static_cast<size_t>(p / block_size_)]) * block_size_ +
                      p % block_size_;
    }
    std::copy(r.block_table.begin(), r.block_table.end(), bt + s * max_blocks);
    StepRequest sr{r.id, row, n, r.num_computed, -1, r.num_generated, r.recompute};
    row += n;
    qs[s + 1] = static_cast<int32_t>(row);
    cl[s] = static_cast<int32_t>(r.num_computed + n);
    meta_.query_start_host.push_back(static_cast<int32_t>(row));
    meta_.context_lens_host.push_back(cl[s]);
    if (r.sample) {
      sr.sample_row = num_logits;
      lr[num_logits++] = row - 1;
    }
    max_q = std::max(max_q, n);
    max_ctx = std::max<int64_t>(max_ctx, cl[s]);
    requests.push_back(sr);
  }
  token_view_ = tokens_.narrow(0, 0, row);
  meta_.positions = positions_.narrow(0, 0, row);
  meta_.slot_mapping = slots_.narrow(0, 0, row);
  meta_.query_start = query_start_.narrow(0, 0, num_seqs + 1);
  meta_.context_lens = context_lens_.narrow(0, 0, num_seqs);
  meta_.block_tables = block_tables_.narrow(0, 0, num_seqs);
  meta_.logits_rows = logits_rows_.narrow(0, 0, num_logits);
  meta_.num_tokens = row;
  meta_.num_seqs = num_seqs;
  meta_.max_query_len = max_q;
  meta_.max_context_len = max_ctx;
}

}  // namespace nnsight::runner
