// Static checks of a trace's graphs against the served model, run where the
// trace is built (the user's process) and again where it is admitted (every
// worker), before any model time is spent:
//   - every Get/Set names a module path the model has ("did you mean ...?")
//     or logits / samples / result;
//   - within one graph, accesses move forward through the model: a later
//     access is never at an earlier step, nor at an earlier point of the same
//     step (module execution order);
//   - a value of an earlier invoke is used only once that invoke has reached
//     the point that computes it.
// Each failure is a TraceError naming both source locations where two are involved.
#pragma once

#include <vector>

#include <nnsight/error.hpp>

#include "dsl/graph.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::tracing {

using nnsight::TraceError;

// graphs[i] is invoke i's main graph (auxiliary graphs are checked alone).
void check_graph(const dsl::Graph& graph, const runner::ModelStructure& structure);
void check_trace(const std::vector<const dsl::Graph*>& graphs, const runner::ModelStructure& structure);

}  // namespace nnsight::tracing
