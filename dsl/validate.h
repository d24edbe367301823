// Validation: everything that can be checked before a graph runs. A graph
// that passes can be evaluated; the evaluator only accepts ValidatedGraph.
//
// Checked: node count and sizes against the Limits (constant bytes, tensor
// elements and rank, string and list lengths, value nesting, encoded size);
// every op name exists and its arguments fit its signature (count and static
// kinds); references point backwards to nodes that produce a value; blocks
// are balanced and nested at most max_depth deep; Get/Set keys are provider
// keys and their steps are sane (iteration-relative steps only inside an
// Iter); Iter ranges are sane and an `all` Iter has an unconditional
// iteration-relative Get or Set directly in its body (so every iteration
// waits for the model and the loop ends when the request does); save names
// are unique; External refers to an earlier invoke; with a FunctionRegistry,
// Apply names exist and their argument counts fit. Errors are
// ValidationError naming the node, its op and the user's source location.
#pragma once

#include "dsl/function_registry.h"
#include "dsl/graph.h"
#include "dsl/limits.h"
#include "dsl/ops/registry.h"

#include <cstdint>
#include <vector>

namespace nnsight::dsl {

struct ValidateOptions {
  Limits limits;                                // sizes the graph must stay within
  const FunctionRegistry* functions = nullptr;  // set: Apply names and arities are checked

  ValidateOptions& with_limits(const Limits& l) {
    limits = l;
    return *this;
  }
  ValidateOptions& with_functions(const FunctionRegistry* f) {
    functions = f;
    return *this;
  }
};

inline constexpr NodeId kNoNode = ~NodeId{0};

// A graph that passed validation, with what the evaluator needs precomputed.
class ValidatedGraph {
 public:
  const Graph& graph() const { return graph_; }
  size_t size() const { return graph_.nodes.size(); }
  const Node& node(NodeId id) const { return graph_.nodes[id]; }
  // For an Iter or Cond node: its End. For a Cond: its Else or kNoNode.
  NodeId block_end(NodeId id) const { return block_end_[id]; }
  NodeId else_of(NodeId id) const { return else_of_[id]; }
  // The op of an Op node (nullptr for other kinds).
  const OpDef* op(NodeId id) const { return ops_[id]; }
  // Static kind of a node's value.
  KindMask kind(NodeId id) const { return kinds_[id]; }
  uint64_t encoded_size() const { return encoded_size_; }

 private:
  friend ValidatedGraph validate(Graph g, const ValidateOptions& options);
  Graph graph_;
  std::vector<NodeId> block_end_;
  std::vector<NodeId> else_of_;
  std::vector<const OpDef*> ops_;
  std::vector<KindMask> kinds_;
  uint64_t encoded_size_ = 0;
};

// Throws ValidationError on the first problem found (in program order).
ValidatedGraph validate(Graph g, const ValidateOptions& options = ValidateOptions());

// Checks the graphs of one trace together: graphs[i].invoke == i, and every
// External node names an earlier invoke's node that exists and has a value.
void validate_trace(const std::vector<const Graph*>& graphs);

}  // namespace nnsight::dsl
