// A trace's request beside untraced ones in one engine: what the decode
// graphs' tests compare between graphs on and off, on the CPU (device path
// forced) and on a GPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runner/engine/engine.h"
#include "runner/model_runner/model_runner.h"

namespace nnsight::testing {

struct TraceBeside {
  std::vector<std::vector<int32_t>> tokens;  // the untraced requests', then the traced one's
  at::Tensor saved;                          // the trace's save "h" (a list), stacked, float32
  int64_t replays = 0;                       // the runner's decode graph replays
  int64_t hooked_replays = 0;                // of them: with the trace's hooks deferred
};

// Greedy requests for `prompts` (max_tokens each), then one running the
// graph file text `graph` on the prompt {9, 8, 7, 6} (traced_max_tokens),
// run to completion; every request must end without an error. With
// `join_midway` the traced request comes first and the others arrive one
// per step after its prefill, so that it decodes beside their prefills.
TraceBeside run_trace_beside(runner::Engine& engine, const runner::ModelRunner& runner,
                             const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                             const std::string& graph, int64_t traced_max_tokens, bool join_midway = false);

// A graph file that saves `key` at every step, as the list "h".
std::string save_every_step(const std::string& key);

}  // namespace nnsight::testing
