// submit_trace: the one way a recorded trace's requests reach an engine. The
// C++ API (LocalTraceBackend), `nnsight trace` (run_graph_trace) and the
// server (TraceService) all submit through it, so a trace is grouped, ordered
// and aborted the same way wherever it came from.
#pragma once

#include <cstddef>
#include <vector>

#include <nnsight/language_model.hpp>

#include "runner/engine/async_engine.h"

namespace nnsight::tracing {

struct TraceSubmitOptions {
  // Request r's output lands at place output_order[r] (a graph trace's
  // prompt order); empty: the order the requests were given.
  std::vector<size_t> output_order;
  // Each request's progress, on the engine's loop thread; empty: none.
  runner::StreamCallback on_step;

  TraceSubmitOptions& order(std::vector<size_t> v) {
    output_order = std::move(v);
    return *this;
  }
  TraceSubmitOptions& progress(runner::StreamCallback v) {
    on_step = std::move(v);
    return *this;
  }
};

// Submits `requests` to `engine` as one group. `on_done` runs once, on the
// engine's loop thread, when every request is done: the outputs arranged by
// `options.output_order`, or the error that failed the group. Returns the
// requests' handles (to abort them). Throws what the engine's submission
// throws for a group it can never run.
std::vector<runner::RequestHandle> submit_trace(runner::AsyncEngine& engine, std::vector<runner::RequestInput> requests,
                                                runner::GroupCallback on_done, TraceSubmitOptions options = {});

// The same, as a future of the collected TraceResult. Cancelling it aborts
// the requests (the result then throws TraceError).
TraceFuture submit_trace(runner::AsyncEngine& engine, std::vector<runner::RequestInput> requests,
                         std::vector<size_t> output_order = {});

}  // namespace nnsight::tracing
