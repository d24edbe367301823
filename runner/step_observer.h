// StepObserver: the seams of the model runner's phases, where another layer
// (tracing, forward-hook configs, activation capture) sees -- and may
// replace -- the values that flow through a step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "batching/batch_meta.h"
#include "runner/step_data.h"

namespace nnsight::runner {

// One request's place in the flat batch of a step.
struct StepRequest {
  uint64_t id = 0;
  int64_t token_start = 0;   // first row in the flat [num_tokens, ...] batch
  int64_t num_tokens = 0;    // rows it owns
  int64_t num_computed = 0;  // position of its first row
  int64_t sample_row = -1;   // row in the [S, vocab] logits, -1 if it does not sample
  int64_t num_generated = 0; // generation step this forward belongs to
  bool recompute = false;    // re-prefill after preemption
};

struct StepContext {
  uint64_t step = 0;
  const std::vector<StepRequest>* requests = nullptr;  // in flat-batch order
  const batching::BatchMeta* meta = nullptr;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // A request arrived. Throwing fails that request alone (the message becomes its error).
  virtual void on_new_request(const NewRequest& request) {}
  // The engine preempted a request; it will be recomputed from scratch.
  virtual void on_preempted(uint64_t id) {}
  virtual void before_forward(const StepContext& ctx) {}
  virtual void after_forward(const StepContext& ctx) {}
  // logits: [S, vocab] float32; rows may be changed in place or the tensor replaced.
  virtual void on_logits(const StepContext& ctx, at::Tensor& logits) {}
  // tokens: [S] int64; entries may be changed (the engine continues with them).
  virtual void on_samples(const StepContext& ctx, at::Tensor& tokens) {}
  // A request is done (by length, stop, abort or error): fill `out.saves`.
  virtual void on_finished(uint64_t id, FinishedRequest& out) {}
  // Requests this observer failed since the last call: (id, message).
  virtual std::vector<std::pair<uint64_t, std::string>> take_errors() { return {}; }
  // Requests an intervention asked to stop: they finish after this step.
  virtual std::vector<uint64_t> take_stopped() { return {}; }
};

}  // namespace nnsight::runner
