// Graph: the intervention code of one invoke, as data. A trace has one graph
// per invoke; `invoke` is this graph's index among them (External nodes refer
// to earlier invokes by that index).
#pragma once

#include "dsl/node.h"

#include <cstdint>
#include <vector>

namespace nnsight::dsl {

struct Graph {
  uint32_t invoke = 0;
  std::vector<Node> nodes;  // program order; NodeId = index

  size_t size() const { return nodes.size(); }
  const Node& operator[](NodeId id) const { return nodes[id]; }
};

// Same invoke index and pairwise identical nodes.
bool identical(const Graph& a, const Graph& b);

}  // namespace nnsight::dsl
