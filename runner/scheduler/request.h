// Request: the engine's state for one generation request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nnsight/request_output.hpp>
#include <nnsight/sampling_params.hpp>

#include "runner/scheduler/block_table.h"

namespace nnsight::runner {

enum class RequestStatus { kWaiting, kRunning, kFinishing, kFinished };

struct Request {
  uint64_t id = 0;
  uint64_t arrival = 0;  // admission order (FCFS priority)
  std::string prompt;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> output_token_ids;
  SamplingParams params;
  uint64_t seed = 0;

  RequestStatus status = RequestStatus::kWaiting;
  int64_t num_computed = 0;  // tokens whose KV is in the cache
  BlockTable blocks;
  bool sent_to_workers = false;  // workers have its NewRequest
  bool preempted = false;        // waiting again after preemption (recompute)
  int64_t num_preemptions = 0;

  // Output state.
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  std::map<std::string, SavedValue> saves;

  int64_t num_tokens() const { return static_cast<int64_t>(prompt_token_ids.size() + output_token_ids.size()); }
  int32_t token_at(int64_t i) const {
    const int64_t p = static_cast<int64_t>(prompt_token_ids.size());
    return i < p ? prompt_token_ids[static_cast<size_t>(i)] : output_token_ids[static_cast<size_t>(i - p)];
  }
  bool has_payload() const { return !params.payload().empty(); }
};

using RequestPtr = std::shared_ptr<Request>;

}  // namespace nnsight::runner
