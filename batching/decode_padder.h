// DecodePadder: a decode step's flat batch padded to a fixed number of rows,
// for a captured CUDA graph (runner/model_runner/decode_graphs.h), whose
// shapes and addresses never change. The step's rows come first, as they
// were; each padding row is token 0 at position 0 of a sequence of one key
// that lives in a scratch cache block no request owns, so it writes and
// reads nothing of anyone's. The host values every layer might read
// (max_context_len, the host copies) are fixed too, so a graph captured on a
// batch of padding rows is valid for every step it replays.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "batching/flattener.h"

namespace nnsight::batching {

class DecodePadder {
 public:
  // max_blocks_per_seq: the block tables' width (the Flattener's);
  // max_context_len: the longest sequence the engine runs (the value every
  // padded batch reports).
  DecodePadder(int64_t max_rows, int64_t max_blocks_per_seq, int64_t block_size, int32_t scratch_block,
               int64_t max_context_len);

  // A decode step: every sequence computes one token and samples it.
  static bool is_decode(const FlatBatch& batch);
  // `batch` (a decode step, or nullptr for none) padded to `rows` rows: views
  // of this padder's buffers, valid until the next call. Its groups are
  // empty (the step's own groups say which rows are whose).
  const FlatBatch& pad(const FlatBatch* batch, int64_t rows);

  int64_t max_rows() const { return buf_.tokens.size(0); }

 private:
  int64_t block_size_;
  int32_t scratch_block_;
  int64_t max_context_len_;
  FlatBuffers buf_;
  FlatBatch padded_;
};

}  // namespace nnsight::batching
