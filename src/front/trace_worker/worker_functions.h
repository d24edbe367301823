// The functions interventions may call by name (Apply nodes) on this
// process's workers. A server registers them before starting the engine;
// graphs naming anything else are rejected at admission.
#pragma once

#include "dsl/function_registry.h"

namespace nnsight::tracing {

dsl::FunctionRegistry& worker_functions();

}  // namespace nnsight::tracing
