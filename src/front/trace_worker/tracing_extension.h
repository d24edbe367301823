// Tracing on a model runner: attaches an Interleaver, so requests carrying a
// trace payload run their mediators (registered by src/front/engine_extensions.cpp).
#pragma once

#include "runner/model_runner/runner_extension.h"

namespace nnsight::tracing {

void attach_tracing(runner::RunnerExtensionContext& ctx);

}  // namespace nnsight::tracing
