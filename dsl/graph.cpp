#include "dsl/graph.h"

namespace nnsight::dsl {

bool identical(const Graph& a, const Graph& b) {
  if (a.invoke != b.invoke || a.nodes.size() != b.nodes.size()) return false;
  for (size_t i = 0; i < a.nodes.size(); ++i)
    if (!identical(a.nodes[i], b.nodes[i])) return false;
  return true;
}

}  // namespace nnsight::dsl
