#include "batching/decode_padder.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace nnsight::batching {

DecodePadder::DecodePadder(int64_t max_rows, int64_t max_blocks_per_seq, int64_t block_size, int32_t scratch_block,
                           int64_t max_context_len)
    : block_size_(block_size),
      scratch_block_(scratch_block),
      max_context_len_(max_context_len),
      buf_(max_rows, max_rows, max_blocks_per_seq) {
  TORCH_CHECK(max_rows > 0 && max_blocks_per_seq > 0 && block_size > 0, "DecodePadder: bad sizes");
}

bool DecodePadder::is_decode(const FlatBatch& batch) {
  const BatchMeta& m = batch.meta;
  return m.num_seqs > 0 && m.num_tokens == m.num_seqs && m.logits_rows.defined() && m.logits_rows.size(0) == m.num_seqs;
}

const FlatBatch& DecodePadder::pad(const FlatBatch* batch, int64_t rows) {
  const int64_t n = batch != nullptr ? batch->meta.num_seqs : 0;
  const int64_t width = buf_.block_tables.size(1);
  TORCH_CHECK(batch == nullptr || is_decode(*batch), "DecodePadder: not a decode step");
  TORCH_CHECK(n <= rows && rows <= max_rows(), "DecodePadder: ", n, " rows do not fit a bucket of ", rows, " (at most ",
              max_rows(), ")");
  const FlatBuffers::Data d = buf_.data();
  int64_t *tok = d.tokens, *pos = d.positions, *slot = d.slots, *lr = d.logits_rows;
  int32_t *qs = d.query_start, *cl = d.context_lens, *bt = d.block_tables;
  BatchMeta& meta = padded_.meta;
  if (n > 0) {
    const BatchMeta& m = batch->meta;
    TORCH_CHECK(m.block_tables.size(1) == width, "DecodePadder: block tables ", m.block_tables.size(1),
                " wide, expected ", width);
    // The flattener's tensors are contiguous views of its buffers.
    const auto copy = [n](void* dst, const at::Tensor& src) {
      std::memcpy(dst, src.contiguous().data_ptr(), static_cast<size_t>(n * src.element_size()));
    };
    copy(tok, batch->token_ids);
    copy(pos, m.positions);
    copy(slot, m.slot_mapping);
    copy(cl, m.context_lens);
    std::memcpy(bt, m.block_tables.contiguous().data_ptr<int32_t>(), static_cast<size_t>(n * width) * sizeof(int32_t));
  }
  for (int64_t r = n; r < rows; ++r) {
    tok[r] = 0;
    pos[r] = 0;
    slot[r] = static_cast<int64_t>(scratch_block_) * block_size_;
    cl[r] = 1;
    bt[r * width] = scratch_block_;
    std::fill(bt + r * width + 1, bt + (r + 1) * width, 0);
  }
  meta.query_start_host.resize(static_cast<size_t>(rows + 1));
  meta.context_lens_host.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r <= rows; ++r) {
    qs[r] = static_cast<int32_t>(r);
    meta.query_start_host[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  }
  for (int64_t r = 0; r < rows; ++r) {
    lr[r] = r;
    meta.context_lens_host[static_cast<size_t>(r)] = cl[r];
  }
  buf_.view(padded_, rows, rows, rows);
  meta.max_query_len = 1;
  meta.max_context_len = max_context_len_;
  meta.block_size = block_size_;
  padded_.groups.clear();
  return padded_;
}

}  // namespace nnsight::batching
