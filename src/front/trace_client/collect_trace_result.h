// The TraceResult of a trace's finished requests: fails the whole trace with
// the first request's error, and brings every save to the CPU (saves on a
// device would tie the result to the engine's device).
#pragma once

#include <vector>

#include <nnsight/language_model.hpp>

namespace nnsight::tracing {

// `outputs`: the requests' final outputs, in invoke order.
TraceResult collect_trace_result(std::vector<RequestOutput> outputs);

}  // namespace nnsight::tracing
