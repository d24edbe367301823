// RequestOutput: what a request produced so far (streaming) or in the end.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nnsight {

enum class FinishReason { kNone, kLength, kStop, kAbort, kError };
const char* to_string(FinishReason r);

// The log-probability of one generated token and of the top-n alternatives.
struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0.f;
  std::vector<std::pair<int32_t, float>> top;  // best first
};

// A value an intervention saved: one tensor (numbers become 0-d tensors), or
// a list of them (a save made at every step, a tuple such as an attention
// module's output; an undefined tensor stands for None).
struct SavedValue {
  at::Tensor tensor;
  std::vector<at::Tensor> list;
  bool is_list = false;

  SavedValue() = default;
  /*implicit*/ SavedValue(at::Tensor t) : tensor(std::move(t)) {}
  static SavedValue of_list(std::vector<at::Tensor> items) {
    SavedValue v;
    v.list = std::move(items);
    v.is_list = true;
    return v;
  }
};

struct RequestOutput {
  uint64_t request_id = 0;
  std::string prompt;
  std::vector<int32_t> prompt_token_ids;
  std::string text;                     // generated text so far (stop string excluded)
  std::vector<int32_t> token_ids;       // generated token ids so far
  std::vector<TokenLogprobs> logprobs;  // one per generated token, if asked for
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;                        // non-empty when finish_reason == kError
  std::map<std::string, SavedValue> saves;  // values an intervention saved, by name
};

}  // namespace nnsight
