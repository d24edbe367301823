// Flattener: lays a step's sequences out as one flat batch -- token ids
// [num_tokens], the BatchMeta every layer receives, and the batch groups that
// say which rows are whose.
//
// Its buffers are allocated once (sized by the engine's budgets) and the
// result is a set of views into them, so preparing a step allocates no
// per-token memory. The result stays valid until the next flatten().
// flatten_slots() is the same loop on buffers sized to one call (tests,
// benchmarks, the model probe).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "batching/batch_groups.h"
#include "batching/batch_meta.h"
#include "batching/seq_slot.h"

namespace nnsight::batching {

struct FlatBatch {
  at::Tensor token_ids;  // [num_tokens] int64
  BatchMeta meta;
  BatchGroups groups;
};

// The host buffers a flat batch is laid out in (allocated once, sized by the
// engine's budgets) and the views of them a FlatBatch holds.
struct FlatBuffers {
  FlatBuffers(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq);
  // Points `batch`'s tensors at the first `tokens` / `seqs` / `logits` rows.
  void view(FlatBatch& batch, int64_t tokens, int64_t seqs, int64_t logits) const;

  // The buffers' memory, for the loops that fill them.
  struct Data {
    int64_t *tokens, *positions, *slots, *logits_rows;
    int32_t *query_start, *context_lens, *block_tables;
  };
  Data data() const;

  at::Tensor tokens, positions, slots;  // [max_tokens] int64
  at::Tensor query_start;               // [max_seqs + 1] int32
  at::Tensor context_lens;              // [max_seqs] int32
  at::Tensor block_tables;              // [max_seqs, max_blocks_per_seq] int32
  at::Tensor logits_rows;               // [max_seqs] int64
};

class Flattener {
 public:
  Flattener(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq, int64_t block_size);

  // Lays out `slots` in order. Throws std::invalid_argument when they exceed
  // the buffers or a block table cannot hold its sequence.
  const FlatBatch& flatten(const std::vector<const SeqSlot*>& slots);
  const FlatBatch& batch() const { return batch_; }

 private:
  int64_t block_size_;
  FlatBuffers buf_;
  FlatBatch batch_;
};

// One flatten on buffers sized to `slots`.
FlatBatch flatten_slots(const std::vector<SeqSlot>& slots, int64_t block_size);

}  // namespace nnsight::batching
