// A sampler row by hand in tests: a temperature, a seed and the generation
// step (the other filters off).
#pragma once

#include <cstdint>

#include "runner/sampling/sampler.h"

namespace nnsight::testing {

inline runner::SamplingRow sampling_row(double temperature, uint64_t seed, int64_t step = 0) {
  runner::SamplingRow r;
  r.temperature = temperature;
  r.seed = seed;
  r.step = step;
  return r;
}

}  // namespace nnsight::testing
