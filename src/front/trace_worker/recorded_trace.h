// A trace recorded somewhere else (a remote LanguageModel) and received as
// data: each request's prompt, sampling params and trace payload (the graphs
// it carries, in the binary form). Before anything is queued the payloads are
// decoded within `limits` and checked as a recorded trace is where it is
// recorded (save names, the schedule against the served model); then the
// requests get this engine's trace id and the tracing policy
// (apply_trace_policy); their payload bytes pass through unchanged, unless
// persistent edits are added (front/trace_worker/persistent_edits.h).
#pragma once

#include <cstdint>
#include <vector>

#include "dsl/graph.h"
#include "dsl/limits.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::tracing {

// `requests[i].params.payload()` holds request i's payload; its invoke index
// is the one the client gave (params.invoke_index()). Throws TraceError
// naming the request for a malformed or inconsistent payload. `edits`
// (checked already) run before the trace's graphs, as its first invokes.
std::vector<runner::RequestInput> prepare_recorded_trace(const runner::ModelStructure& structure,
                                                         std::vector<runner::RequestInput> requests,
                                                         const dsl::Limits& limits, uint64_t trace_id,
                                                         const std::vector<dsl::Graph>& edits = {});

}  // namespace nnsight::tracing
