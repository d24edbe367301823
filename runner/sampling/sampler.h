// Sampler: turns a step's logits into tokens, for all sampling rows at once.
//
// Greedy rows take the argmax. Stochastic rows apply temperature, top-k,
// top-p and min-p, then draw with the exponential race (argmax of p / E,
// E ~ Exp(1)) from a generator seeded by (request seed, generation step):
// a request's draws depend only on its own seed and step, never on which
// other requests share the batch, and survive preemption.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include <nnsight/request_output.hpp>

namespace nnsight::runner {

struct SamplingRow {
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  double min_p = 0.0;
  uint64_t seed = 0;
  int64_t step = 0;       // generation step (tokens generated before this one)
  int64_t logprobs = -1;  // top-n to report; -1 = none
};

struct SamplerOutput {
  at::Tensor tokens;                    // [S] int64 (CPU)
  std::vector<TokenLogprobs> logprobs;  // [S]; filled only for rows that asked
};

// logits: [S, vocab] float32.
SamplerOutput sample(const at::Tensor& logits, const std::vector<SamplingRow>& rows);

// splitmix64 of (seed, step): the key of a row's noise, on the CPU (its
// generator's seed) and on the device path (device_sampler.h).
uint64_t mix_seed(uint64_t seed, int64_t step);

// Log-probabilities of `token` and the top-n tokens of one row of raw logits.
TokenLogprobs logprobs_of(const at::Tensor& row_logits, int32_t token, int64_t top_n);

}  // namespace nnsight::runner
