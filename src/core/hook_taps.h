// HookTaps: a forward whose module hooks run afterwards. While one is active
// on a thread, a hooked module on that thread runs without calling its hooks
// and records instead a copy of what they would have seen (its inputs before
// the body; its inputs and output after), in the order the forward reached
// them. `fire` later calls each module's hooks on those values, in that
// order.
//
// Why: a CUDA graph replays kernels, never host code, so a hook cannot run
// inside a replayed forward. A hook that only reads its values (a trace that
// saves) sees the same values after the replay, provided the graph copied
// them where it can find them: the recorded copies are made by kernels the
// graph captures, into memory the graph keeps, so each replay refills them
// (runner/model_runner/decode_graphs.h). Hooks that replace a value cannot
// wait: the runner defers only hooks their owners declare read-only
// (StepObserver::deferrable_hooks).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "core/module_io.h"

namespace nnsight {

class Module;

class HookTaps {
 public:
  // One point where hooks were due: before `module`'s body (its pre-hooks)
  // or after it (its forward hooks).
  struct Event {
    Module* module = nullptr;
    bool before = false;
    ModuleIO inputs;  // copies
    ModuleIO output;  // a copy (after the body only)
  };

  // Activates recording on this thread (they do not nest).
  HookTaps();
  ~HookTaps();
  HookTaps(const HookTaps&) = delete;
  HookTaps& operator=(const HookTaps&) = delete;

  const std::vector<Event>& events() const { return events_; }
  std::vector<Event> take_events() { return std::move(events_); }

  // The recording active on this thread (null: hooks run as they come).
  static HookTaps* active();
  void record(Module& module, bool before, const ModuleIO& inputs, const ModuleIO* output);

  // Calls the hooks of each event, in order, on copies of the first `rows`
  // rows of values recorded for a batch of `padded_rows` rows (a padded
  // bucket; values whose first dimension is not `padded_rows` go whole).
  // The copies are the hooks' own: the next replay overwrites the recorded
  // values, not what a hook kept. What a hook returns is not applied.
  static void fire(const std::vector<Event>& events, int64_t rows, int64_t padded_rows);

 private:
  std::vector<Event> events_;
};

}  // namespace nnsight
