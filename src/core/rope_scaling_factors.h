// Llama-3 rope scaling expressed as per-frequency divisors, the form
// llama.cpp stores it in (the "rope_freqs.weight" GGUF tensor), and the way
// back from those divisors to RopeScaling's four parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_config.h"

namespace nnsight {

// Divisor of each rotary inverse frequency theta^(-2i/head_dim), i < head_dim/2,
// under Llama-3 scaling (1 for high frequencies, `factor` for low ones, a
// smooth blend between). All 1 when scaling.factor is 0.
std::vector<double> llama3_rope_freq_factors(const RopeScaling& scaling, double theta, int64_t head_dim);

// The RopeScaling that reproduces `factors` (within float32 precision), taking
// `original_max_position` as given: only the ratios original/low and
// original/high are determined by the divisors. Throws LoadError prefixed by
// `what` when the divisors are not of the Llama-3 form.
RopeScaling fit_llama3_rope_scaling(const std::vector<float>& factors, double theta, int64_t head_dim,
                                    int64_t original_max_position, const std::string& what);

}  // namespace nnsight
