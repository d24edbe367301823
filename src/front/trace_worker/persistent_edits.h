// Persistent edits (LanguageModel::edit, the server's named edits): graphs
// recorded once that run in every later trace as its first invokes, without
// a prompt of their own -- they see every prompt's rows, as NNsight's edit
// graph applies to the whole batch before the trace's own interventions.
// The trace's invokes are numbered after the edits, and TraceGroup orders
// mediators by invoke, so at every point of the model the edits' reads and
// writes happen before the trace's: a trace reads the edited value and its
// own write lands on top of the edit's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "front/trace_worker/trace_payload.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::tracing {

// Checks a graph meant as an edit (`what` names it in messages): it is one
// invoke's (no values of other invokes), saves nothing (an edit runs in
// every later trace; save in the trace instead) and passes the static checks
// against `structure`. Throws TraceError.
void check_edit(const dsl::Graph& edit, const runner::ModelStructure& structure, const std::string& what);

// Renumbers a trace's graph to come after `count` edits: its own invoke
// index and the earlier invokes its External nodes name move up by `count`.
void shift_invokes(dsl::Graph& graph, uint32_t count);

// Adds `edits` to a trace's requests whose payloads are `payloads` (decoded,
// one per request, in order): every graph moves after the edits, the edits
// ride on the first request as invokes without a prompt (edit k is invoke
// k), and each request's invoke index moves up by the number of edits. The
// payload bytes in the requests' params are rewritten.
void add_edits(std::vector<TracePayload>& payloads, std::vector<runner::RequestInput>& requests,
               const std::vector<dsl::Graph>& edits);

}  // namespace nnsight::tracing
