#include "front/trace_worker/schedule_check.h"

#include <limits>
#include <optional>

#include "dsl/analysis.h"

namespace nnsight::tracing {

namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max() / 4;  // "after every step"

// When an access happens: (step, position in the step's event order). For an
// access inside an iteration, `first` is its first iteration and `last` its
// last (kEnd for an iteration over all steps).
struct Time {
  int64_t step = 0;
  int64_t order = 0;
  bool operator<(const Time& o) const { return step < o.step || (step == o.step && order < o.order); }
};

int64_t key_order(const ProviderKey& key, const runner::ModelStructure& s) { return s.order_of(key); }
bool is_result(const dsl::Access& a) { return a.provider.kind == KeyKind::Result; }

Time first_time(const dsl::Access& a, const runner::ModelStructure& s) {
  const int64_t order = key_order(a.provider, s);
  if (is_result(a)) return {kEnd, order};
  if (a.step.mode == dsl::StepSpec::Mode::Fixed) return {a.step.value, order};
  return {a.range.start + a.step.value, order};
}

Time last_time(const dsl::Access& a, const runner::ModelStructure& s) {
  const int64_t order = key_order(a.provider, s);
  if (is_result(a)) return {kEnd, order};
  if (a.step.mode == dsl::StepSpec::Mode::Fixed) return {a.step.value, order};
  if (a.range.all) return {kEnd - 1, order};
  const int64_t n = (a.range.stop - 1 - a.range.start) / a.range.stride;
  return {a.range.start + n * a.range.stride + a.step.value, order};
}

std::string where(const dsl::Graph& g, dsl::NodeId id) {
  const auto& loc = g.nodes[id].loc;
  return loc.known() ? loc.str() : "node " + std::to_string(id);
}

std::string step_text(const dsl::Access& a) {
  if (is_result(a)) return "the end of the request";
  if (a.step.mode == dsl::StepSpec::Mode::Fixed) return "step " + std::to_string(a.step.value);
  return a.step.value == 0 ? "each iterated step" : "iterated step +" + std::to_string(a.step.value);
}

void check_callable(const dsl::Graph& g, dsl::NodeId id, const runner::ModelStructure& s) {
  const std::string& path = g.nodes[id].name;
  const runner::ModuleInfo* m = s.find_module(path);
  if (!m)
    throw TraceError(where(g, id) + ": unknown module path '" + path + "' (did you mean '" + s.closest_path(path) +
                     "'?)");
  if (!m->callable)
    throw TraceError(where(g, id) + ": module '" + path + "' (" + m->type_name +
                     ") cannot be called in a graph: attention and decoder layers need the step's positions and KV "
                     "cache; call their projections, norms or MLP instead");
}

void check_keys(const dsl::Graph& g, const runner::ModelStructure& s) {
  for (dsl::NodeId id = 0; id < g.nodes.size(); ++id) {
    const dsl::Node& n = g.nodes[id];
    if (n.kind == dsl::NodeKind::Call) {
      check_callable(g, id, s);
      continue;
    }
    if (n.kind == dsl::NodeKind::Apply) {
      if (!s.has_function(n.name)) {
        std::string known;
        for (const auto& f : s.functions()) known += (known.empty() ? "" : ", ") + f;
        throw TraceError(where(g, id) + ": function '" + n.name +
                         "' is not registered in the process that runs the model (registered: " +
                         (known.empty() ? "none" : known) + "; include/nnsight/functions.hpp)");
      }
      continue;
    }
    if (n.kind != dsl::NodeKind::Get && n.kind != dsl::NodeKind::Set) continue;
    if (!n.key) throw TraceError(where(g, id) + ": '" + n.name + "' is not a provider key");
    if (!n.key->is_module()) continue;
    const std::string& path = n.key->module_path;
    if (!s.find_module(path)) {
      throw TraceError(where(g, id) + ": unknown module path '" + path + "' (did you mean '" + s.closest_path(path) +
                       "'?)");
    }
  }
}

}  // namespace

// grad() of an element (`h[{i}]`) is the gradient the model holds only where
// the value is a tuple (a module's tuple output, `.inputs`): an index into a
// tensor is a value computed from it, whose gradient the model never sees.
void check_grads(const dsl::Graph& g, const runner::ModelStructure& s) {
  for (dsl::NodeId id = 0; id < g.nodes.size(); ++id) {
    const auto& n = g.nodes[id];
    if (n.kind != dsl::NodeKind::Grad || n.args.empty() || n.args[0] >= id) continue;
    const dsl::NodeId element = n.args[0];
    const dsl::NodeId base = dsl::grad_source(g, element);
    if (base == element || g.nodes[base].kind != dsl::NodeKind::Get || !g.nodes[base].key) continue;
    const ProviderKey& key = *g.nodes[base].key;
    bool tuple = key.kind == KeyKind::ModuleInputs;
    if (key.kind == KeyKind::ModuleOutput) {
      const runner::ModuleInfo* m = s.find_module(key.module_path);
      tuple = m == nullptr || m->output_tuple_size > 0;  // an unknown path is check_keys' error
    }
    if (!tuple) throw TraceError(where(g, id) + ": " + dsl::grad_of_computed_value(g, element));
  }
}

void check_graph(const dsl::Graph& g, const runner::ModelStructure& s) {
  check_keys(g, s);
  check_grads(g, s);
  const dsl::GraphAnalysis an = dsl::analyze(g);
  // Each access must not come before the latest one that certainly ran.
  std::optional<dsl::Access> prev;
  for (const auto& a : an.accesses) {
    if (prev) {
      const bool same_iter = a.iter != dsl::kNoNode && a.iter == prev->iter;
      const Time before = same_iter ? Time{prev->step.value, key_order(prev->provider, s)} : last_time(*prev, s);
      const Time now = same_iter ? Time{a.step.value, key_order(a.provider, s)} : first_time(a, s);
      const bool result_after_all = is_result(a);
      if (now < before && !result_after_all) {
        const bool after_all = prev->iter != dsl::kNoNode && prev->range.all && !same_iter;
        std::string msg = where(g, a.node) + ": out-of-order access: '" + a.key + "' at " + step_text(a) +
                          " comes after '" + prev->key + "' at " + step_text(*prev) + " (" + where(g, prev->node) + ")";
        msg += after_all ? ", which iterates over all steps: after it only 'result' is available"
                         : ", but the model produces it earlier; address a later step (envoy.next() or an iteration)";
        throw TraceError(msg);
      }
    }
    if (!a.conditional) prev = a;
  }
}

void check_trace(const std::vector<const dsl::Graph*>& graphs, const runner::ModelStructure& s) {
  for (const auto* g : graphs) check_graph(*g, s);
  if (graphs.size() < 2) return;
  const auto analyses = dsl::analyze_trace(graphs);
  for (size_t j = 0; j < analyses.size(); ++j) {
    for (const auto& ext : analyses[j].externals) {
      if (!ext.needed) continue;  // computed before the other invoke's first access
      const dsl::Graph& other = *graphs[ext.invoke];
      const dsl::Graph& self = *graphs[j];
      const Time need = last_time(*ext.needed, s);
      const Time at = ext.at ? first_time(*ext.at, s) : Time{-1, -1};
      if (at < need) {
        throw TraceError(
            where(self, ext.node) + ": invoke " + std::to_string(j) + " uses a value of invoke " +
            std::to_string(ext.invoke) + " (" + where(other, ext.target) + ") that exists only after '" +
            ext.needed->key + "' at " + step_text(*ext.needed) + ", but invoke " + std::to_string(j) + " needs it " +
            (ext.at ? "at '" + ext.at->key + "' at " + step_text(*ext.at) + " (" + where(self, ext.at->node) + ")"
                    : std::string("before its first access")) +
            ", which the model reaches earlier");
      }
    }
  }
}

}  // namespace nnsight::tracing
