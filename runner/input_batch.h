// InputBatch: the model runner's persistent input buffers. Each step's flat
// token ids and BatchMeta are written into tensors allocated once at start
// (sized by the engine's budgets) and handed to the model as views, so
// preparing a step allocates no per-token memory.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "batching/batch_meta.h"
#include "runner/step_data.h"
#include "runner/step_observer.h"

namespace nnsight::runner {

class InputBatch {
 public:
  InputBatch(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq, int64_t block_size);

  // Fills the buffers from the scheduled requests that are not excluded.
  // `requests` receives each request's place in the batch.
  void prepare(const std::vector<const ScheduledRequest*>& scheduled, std::vector<StepRequest>& requests);

  const at::Tensor& token_ids() const { return token_view_; }  // [T] int64
  const batching::BatchMeta& meta() const { return meta_; }

 private:
  int64_t block_size_;
  at::Tensor tokens_, positions_, slots_, query_start_, context_lens_, block_tables_, logits_rows_;
  at::Tensor token_view_;
  batching::BatchMeta meta_;
};

}  // namespace nnsight::runner
