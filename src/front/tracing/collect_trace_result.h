// The TraceResult of a trace's requests: waits for each, fails the whole
// trace with the first request's error, and brings every save to the CPU
// (saves on a device would tie the result to the engine's device).
#pragma once

#include <vector>

#include <nnsight/language_model.hpp>

#include "runner/async_engine.h"

namespace nnsight::tracing {

TraceResult collect_trace_result(const std::vector<runner::RequestHandle>& handles);

}  // namespace nnsight::tracing
