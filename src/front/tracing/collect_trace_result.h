// The TraceResult of a trace's requests: waits for each, fails the whole
// trace with the first request's error, and brings every save to the CPU
// (saves on a device would tie the result to the engine's device).
#pragma once

#include <vector>

#include <nnsight/language_model.hpp>

#include "runner/engine/async_engine.h"

namespace nnsight::tracing {

TraceResult collect_trace_result(const std::vector<runner::RequestHandle>& handles);
// The same from the requests' final outputs (in invoke order).
TraceResult collect_trace_result(std::vector<RequestOutput> outputs);

}  // namespace nnsight::tracing
