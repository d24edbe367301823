// Sampling on the device path (a GPU, or the device path forced on the CPU):
// every sampling row at once, in a fixed number of ATen calls -- temperature,
// top-k, top-p and min-p as the CPU sampler applies them, then the same
// exponential race (argmax of p / e, e ~ Exp(1)). Only the sampled tokens
// leave the device, not a vocabulary of floats per row.
//
// The noise is a counter-based hash (splitmix64) of the row's key --
// mix_seed(request seed, generation step), as the CPU sampler seeds its
// generator -- and the token id: stateless, so a row's token never depends on
// its batch companions and survives preemption, and the same on any device
// (integer arithmetic). It is not the CPU sampler's noise (LibTorch's CPU
// generator has no device counterpart), so a request sampled on a GPU draws
// other tokens than on the CPU kernels' path, with the same distribution.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "runner/sampling/sampler.h"

namespace nnsight::runner {

// logits: [R, V] (any float dtype, on the device); rows[i] describes row i
// (temperature > 0). Returns the sampled token ids, [R] int64 on the device.
at::Tensor sample_on_device(const at::Tensor& logits, const std::vector<const SamplingRow*>& rows);

// The noise's uniform in (0, 1) for (key, token ids): [R] int64 keys x [V]
// ids -> [R, V] float64. Exposed for the tests.
at::Tensor hashed_uniform(const at::Tensor& keys, const at::Tensor& ids);

}  // namespace nnsight::runner
