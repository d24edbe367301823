#include "dsl/analysis.h"

namespace nnsight::dsl {

GraphAnalysis analyze(const Graph& g) {
  GraphAnalysis a;
  a.point_of.assign(g.nodes.size(), -1);
  struct Open {
    NodeId node;
    bool is_iter;
  };
  std::vector<Open> open;
  int64_t last = -1;
  for (NodeId i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    switch (n.kind) {
      case NodeKind::Iter:
        open.push_back({i, true});
        break;
      case NodeKind::Cond:
        open.push_back({i, false});
        break;
      case NodeKind::End:
        if (!open.empty()) open.pop_back();
        break;
      case NodeKind::Get:
      case NodeKind::Set: {
        Access acc;
        acc.node = i;
        acc.is_set = n.kind == NodeKind::Set;
        acc.key = n.name;
        if (n.key) acc.provider = *n.key;
        acc.step = n.step;
        for (auto it = open.rbegin(); it != open.rend(); ++it) {
          if (!it->is_iter) {
            acc.conditional = true;
            continue;
          }
          if (acc.iter == kNoNode) {
            acc.iter = it->node;
            acc.range = g.nodes[it->node].range;
          }
        }
        a.accesses.push_back(std::move(acc));
        last = static_cast<int64_t>(a.accesses.size()) - 1;
        break;
      }
      case NodeKind::External: {
        ExternalNeed need;
        need.node = i;
        need.invoke = n.ext_invoke;
        need.target = n.ext_node;
        if (last >= 0) need.at = a.accesses[static_cast<size_t>(last)];
        a.externals.push_back(std::move(need));
        break;
      }
      default:
        break;
    }
    a.point_of[i] = last;
  }
  return a;
}

std::vector<GraphAnalysis> analyze_trace(const std::vector<const Graph*>& graphs) {
  std::vector<GraphAnalysis> out;
  out.reserve(graphs.size());
  for (const Graph* g : graphs) out.push_back(analyze(*g));
  for (GraphAnalysis& a : out) {
    for (ExternalNeed& need : a.externals) {
      if (need.invoke >= out.size()) continue;
      const GraphAnalysis& other = out[need.invoke];
      if (need.target >= other.point_of.size()) continue;
      int64_t p = other.point_of[need.target];
      if (p >= 0) need.needed = other.accesses[static_cast<size_t>(p)];
    }
  }
  return out;
}

bool uses_gradients(const Graph& g) {
  for (const auto& n : g.nodes)
    if (n.kind == NodeKind::Backward) return true;
  return false;
}

bool leaves_forward_alone(const Graph& g) {
  for (const auto& n : g.nodes) {
    switch (n.kind) {
      case NodeKind::Set:
        if (!n.key || n.key->is_module()) return false;
        break;
      case NodeKind::Op:
        if (n.name == "setitem") return false;
        break;
      case NodeKind::Apply:
      case NodeKind::Backward:
      case NodeKind::Grad:
        return false;
      default:
        break;
    }
  }
  return true;
}

NodeId grad_source(const Graph& g, NodeId value) {
  const Node& n = g.nodes[value];
  if (n.kind == NodeKind::Op && n.name == "getitem" && n.args.size() == 2) {
    const Node& index = g.nodes[n.args[1]];
    if (index.kind == NodeKind::Const && index.value.kind() == ValueKind::Int) return n.args[0];
  }
  return value;
}

std::string grad_of_computed_value(const Graph& g, NodeId src) {
  const Node& s = g.nodes[src];
  std::string msg =
      "grad() is taken of a value read from the model (a module's output or input, an element of its tuple, or "
      "logits), not of " +
      s.describe(src);
  if (s.kind == NodeKind::Op && (s.name == "getitem" || s.name == "narrow" || s.name == "select") && !s.args.empty() &&
      g.nodes[s.args[0]].kind == NodeKind::Get) {
    msg += ": take the gradient first, then index it (h.grad()[{-1}], not h[{-1}].grad())";
  }
  return msg;
}

}  // namespace nnsight::dsl
