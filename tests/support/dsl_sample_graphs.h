// Graphs that use every node kind and every kind of constant, for round-trip
// and evaluation tests.
#pragma once

#include "dsl/function_registry.h"
#include "dsl/graph.h"

namespace nnsight::testing {

// Invoke 1 of a trace; uses every NodeKind and every ValueKind (tensors of
// every dtype, NaN/-0.0/inf doubles, nested lists, tuples with none, index
// specs with every item kind, unicode strings). Runs against a FakeProvider
// that has external (0, 3) and the registry below.
dsl::Graph every_kind_graph();
// Functions every_kind_graph applies: "scale"(tensor, number) -> tensor * number.
const dsl::FunctionRegistry& sample_functions();

}  // namespace nnsight::testing
