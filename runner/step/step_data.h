// The data that crosses from the engine to the workers each step
// (SchedulerOutput) and back (ModelRunnerOutput). Both serialize with cereal
// for the multi-process executor; the in-process executor passes them as is.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nnsight/request_output.hpp>
#include <nnsight/sampling_params.hpp>

#include "batching/seq_slot.h"

namespace nnsight::runner {

// A request the workers have not seen yet.
struct NewRequest {
  uint64_t id = 0;
  SamplingParams params;
  std::vector<int32_t> prompt_token_ids;
  uint64_t seed = 0;  // params.seed or one the engine drew for it

  template <class A>
  void serialize(A& ar) {
    ar(id, params, prompt_token_ids, seed);
  }
};

struct SchedulerOutput {
  uint64_t step = 0;
  std::vector<NewRequest> new_requests;
  std::vector<batching::SeqSlot> scheduled;  // in flat-batch order
  // Requests the engine ended (abort, stop string) or preempted since the last
  // step: workers finish them (collect saves) and drop their state.
  std::vector<uint64_t> finished_ids;
  std::vector<uint64_t> preempted_ids;

  int64_t num_tokens() const {
    int64_t n = 0;
    for (const auto& s : scheduled) n += static_cast<int64_t>(s.token_ids.size());
    return n;
  }
  bool empty() const { return scheduled.empty() && finished_ids.empty() && new_requests.empty(); }

  template <class A>
  void serialize(A& ar) {
    ar(step, new_requests, scheduled, finished_ids, preempted_ids);
  }
};

// What one request got this step.
struct SampledToken {
  uint64_t id = 0;
  int32_t token = -1;
  TokenLogprobs logprobs;  // filled when the request asked for logprobs
  bool has_logprobs = false;

  template <class A>
  void serialize(A& ar) {
    ar(id, token, logprobs.token, logprobs.logprob, logprobs.top, has_logprobs);
  }
};

// A request the worker finished (its saves, if it carried an intervention).
struct FinishedRequest {
  uint64_t id = 0;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  std::map<std::string, SavedValue> saves;
};

struct ModelRunnerOutput {
  uint64_t step = 0;
  std::vector<SampledToken> sampled;
  // Requests that ended on the worker: by length / stop token / EOS (decided
  // there so the finish phase runs in the same step), by an intervention
  // error, or because the engine asked (finished_ids).
  std::vector<FinishedRequest> finished;
};

}  // namespace nnsight::runner
