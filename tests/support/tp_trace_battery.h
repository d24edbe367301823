// A fixed set of traces that read and write module inputs and outputs,
// logits and samples, run against a LanguageModel; the tensor-parallel
// tests run it at TP=1 and at TP=n and compare everything it returns.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include <nnsight/nnsight.hpp>

namespace nnsight::testing {

struct TraceBattery {
  std::vector<std::vector<int32_t>> prompts;  // two prompts (token ids)
  // Values read (and saved) in one step, in execution order: "path.input" or "path.output".
  std::vector<std::string> reads;
  std::string scaled_output;  // a module whose output is scaled by 1.5 (runs before halved_input's module)
  std::string
      halved_input;  // a module whose input's first 8 columns are zeroed and output scaled by 0.9 (runs before `up`)
  std::string up;    // a column-parallel module: output columns [zero_from, end) are zeroed
  int64_t zero_from = 0;
  int64_t replacement_token = 7;  // the token the samples are replaced with at step 1
  // An attention module with `pattern` and `z` points whose head 2 is zeroed
  // and every head's output scaled (at TP=2, head 2 lives on the second rank).
  std::string attention;
};

// Results by name: "<trace>/<what>" tensors; "<trace>/tokens/<invoke>" hold
// generated token ids (compare exactly); everything else compares within a tolerance.
std::map<std::string, at::Tensor> run_trace_battery(LanguageModel& lm, const TraceBattery& b);

// Same keys, tokens equal, every other tensor of the same shape and within
// `tolerance` (max abs difference). Returns the largest difference seen.
double expect_same_results(const std::map<std::string, at::Tensor>& expected,
                           const std::map<std::string, at::Tensor>& got, double tolerance);

}  // namespace nnsight::testing
