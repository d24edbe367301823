// The TraceResult of a trace's requests: waits for each, fails the whole
// trace with the first request's error, and brings every save to the CPU
// (saves on a device would tie the result to the engine's device).
// An interrupt (nnsight::request_interrupt) after the trace was submitted, that
// is, once interrupt_count() has moved from `submitted_at`, aborts every
// request of the trace still running, waits for them, and throws Interrupted.
#pragma once

#include <cstdint>
#include <vector>

#include <nnsight/language_model.hpp>

#include "runner/engine/async_engine.h"

namespace nnsight::tracing {

TraceResult collect_trace_result(runner::AsyncEngine& engine, const std::vector<runner::RequestHandle>& handles,
                                 uint64_t submitted_at);
// The same from the requests' final outputs (in invoke order).
TraceResult collect_trace_result(std::vector<RequestOutput> outputs);

}  // namespace nnsight::tracing
