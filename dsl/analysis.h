// Static schedule analysis, for the tracing layer to reject impossible
// schedules before the model runs.
//
// A mediator runs its graph in program order and can only move forward
// through the model: it waits at each Get/Set (an "access": key @ step) until
// the model reaches that point. So:
//   - accesses: every Get and Set of a graph in program order, with the step
//     as written and, for iteration-relative steps, the enclosing Iter's range;
//   - point_of[n]: the last access at or before node n (-1: none). Node n's
//     value exists once the mediator has passed that access;
//   - externals: for each External node, the access of the other invoke after
//     which the referenced value exists (needed), and this graph's last access
//     before the External is used (at). Invoke i can use the value only if the
//     model reaches `needed` (in invoke j's mediator) no later than `at`.
// Ordering accesses across keys (module execution order, logits after the
// forward, ...) is the tracing layer's knowledge, not this module's.
#pragma once

#include "dsl/graph.h"
#include "dsl/validate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nnsight::dsl {

struct Access {
  NodeId node = 0;  // the Get or Set node
  bool is_set = false;
  std::string key;           // as written
  ProviderKey provider;      // parsed (a graph whose keys were checked)
  StepSpec step;             // as written
  NodeId iter = kNoNode;     // innermost enclosing Iter, if any
  IterRange range;           // that Iter's range (meaningful when iter != kNoNode)
  bool conditional = false;  // inside a Cond block: may not run
};

struct ExternalNeed {
  NodeId node = 0;               // the External node in this graph
  uint32_t invoke = 0;           // the invoke it refers to
  NodeId target = 0;             // the node there
  std::optional<Access> needed;  // the other invoke's access after which target exists (none: from the start)
  std::optional<Access> at;      // this graph's last access before the External (none: at the start)
};

struct GraphAnalysis {
  std::vector<Access> accesses;         // program order
  std::vector<int64_t> point_of;        // per node: index into accesses, or -1
  std::vector<ExternalNeed> externals;  // `needed` is filled by analyze_trace
};

// Expects a structurally valid graph (balanced blocks; see validate()).
GraphAnalysis analyze(const Graph& g);
// Whether the graph calls backward() (its requests then run with autograd).
bool uses_gradients(const Graph& g);
// Whether running the graph leaves the model's forward as it was: no write
// to a module's value (a Set of a module key; setitem, in place, on any
// value), no registered function (an Apply may change its arguments in
// place; we cannot tell), no backward(). Such a graph's reads may be served
// after the forward, from copies (a CUDA graph's replay: core/hook_taps.h).
// Writes to logits and samples still qualify: those phases follow the forward.
bool leaves_forward_alone(const Graph& g);
// The node whose model value `value` is, for a grad(): `value` itself, or,
// for a getitem of it with a constant int (an element of a module's tuple),
// the node it indexes. Whether that is a Get of a differentiable key is the
// validator's check.
NodeId grad_source(const Graph& g, NodeId value);

// The message for grad() of `src`, a value the model never held (an op's
// result): names it and, when it indexes a value read from the model, says
// to take the gradient first and index it then (`h.grad()[{-1}]`).
std::string grad_of_computed_value(const Graph& g, NodeId src);
// Analyses every graph of a trace and fills each External's `needed` from the
// graph it refers to. graphs[i] must be invoke i (validate_trace checks).
std::vector<GraphAnalysis> analyze_trace(const std::vector<const Graph*>& graphs);

}  // namespace nnsight::dsl
