// Which requests run with 8-bit activations under EngineArgs::fast_untraced:
// those no trace reads; the model runner lists their rows for the packed
// layers (core/kernels/int8_rows.h). The prefix cache needs no salt for
// them: a traced request never reuses cached blocks (trace_payload's
// policy turns prefix caching off), so every request that does is 8-bit.
#pragma once

#include <nnsight/sampling_params.hpp>

namespace nnsight::runner {

// No intervention graph (a trace, a generate with a body, a persistent edit
// all travel as one) and no gradients.
inline bool runs_int8(const SamplingParams& p) { return p.payload().empty() && !p.gradients(); }

}  // namespace nnsight::runner
