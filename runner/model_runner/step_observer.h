// StepObserver: the seams of the model runner's phases, where another layer
// (tracing, forward-hook configs, activation capture) sees -- and may
// replace -- the values that flow through a step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "batching/batch_groups.h"
#include "batching/batch_meta.h"
#include "runner/step/step_data.h"

namespace nnsight::runner {

// What observers see of the step in progress.
struct StepContext {
  uint64_t step = 0;
  const batching::BatchGroups* groups = nullptr;  // each request's rows, in flat-batch order
  const batching::BatchMeta* meta = nullptr;      // on the model's device
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // A request arrived. Throwing fails that request alone (the message becomes its error).
  virtual void on_new_request(const NewRequest& request) {}
  // The engine preempted a request; it will be recomputed from scratch.
  virtual void on_preempted(uint64_t id) {}
  virtual void before_forward(const StepContext& ctx) {}
  // Asked after before_forward: how many of the module hooks on the model
  // now are this observer's and may run after the forward, on copies of
  // their values (core/hook_taps.h) -- hooks that only read, whatever this
  // step's values are. A decode step whose every hook is deferrable replays
  // a CUDA graph and fires them after it (decode_graphs.h); one hook that
  // is not keeps the step eager.
  virtual size_t deferrable_hooks(const StepContext& ctx) const { return 0; }
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
