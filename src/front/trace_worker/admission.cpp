#include "front/trace_worker/admission.h"

#include <set>
#include <string>
#include <vector>

#include <nnsight/error.hpp>

#include "dsl/analysis.h"
#include "dsl/validate.h"
#include "front/trace_worker/schedule_check.h"

namespace nnsight::tracing {

namespace {

// Module keys ("<path>.output" / ".input" / ".inputs") a graph reads or writes:
// the hooks its mediator needs while it lives.
std::set<ProviderKey> module_keys(const dsl::Graph& g) {
  std::set<ProviderKey> keys;
  for (const auto& n : g.nodes) {
    if (n.kind != dsl::NodeKind::Get && n.kind != dsl::NodeKind::Set) continue;
    if (n.key && n.key->is_module()) keys.insert(*n.key);
  }
  return keys;
}

// Keys of the Get nodes whose values a Grad node names (directly, or through
// an element of a tuple): their reads are written back into the model's
// value in a gradient step, so that the value read is the one the forward
// goes on with and autograd can reach it.
std::set<ProviderKey> grad_keys(const dsl::Graph& g) {
  std::set<ProviderKey> keys;
  for (const auto& n : g.nodes) {
    if (n.kind != dsl::NodeKind::Grad) continue;
    keys.insert(*g.nodes[dsl::grad_source(g, n.args[0])].key);  // a Get (validated)
  }
  return keys;
}

}  // namespace

void admit_request(const runner::NewRequest& nr, TracePayload payload, TraceGroup& g, const AdmissionContext& ctx) {
  if (g.failed) throw TraceError("another invoke of this trace failed before it started");
  if (g.started) throw TraceError("trace " + std::to_string(g.trace_id()) + " is already running");
  for (auto& pg : payload.graphs) {
    check_graph(pg.graph, *ctx.structure);
    std::set<ProviderKey> keys = module_keys(pg.graph);
    const bool backward = dsl::uses_gradients(pg.graph);
    if (backward && !nr.params.gradients())
      throw TraceError(
          "the trace calls backward(), but its requests were not admitted for gradients "
          "(SamplingParams::gradients; the tracing front end sets it)");
    if (backward && ctx.world_size > 1)
      throw TraceError("gradients (backward()) need tensor_parallel_size 1; this engine runs " +
                       std::to_string(ctx.world_size) + " ranks");
    const uint32_t invoke = pg.graph.invoke;
    dsl::ValidatedGraph vg = dsl::validate(
        std::move(pg.graph), dsl::ValidateOptions().with_limits(ctx.limits).with_functions(ctx.functions));
    auto m = std::make_unique<Mediator>(g, pg.role == GraphRole::kPromptless ? 0 : nr.id, invoke, pg.role,
                                        std::move(vg), ctx.functions);
    m->module_keys = std::move(keys);
    m->grad_keys = grad_keys(m->graph());
    m->set_caller(ctx.caller);
    if (ctx.memory_budget_bytes > 0) m->set_memory_budget(std::make_shared<MemoryBudget>(ctx.memory_budget_bytes));
    g.add(std::move(m));
  }
}

void check_complete_trace(TraceGroup& g, const AdmissionContext& ctx) {
  std::vector<const dsl::Graph*> graphs(g.num_invokes(), nullptr);
  for (const auto& m : g.mediators())
    if (m->role() != GraphRole::kAuxiliary && m->invoke() < graphs.size()) graphs[m->invoke()] = &m->graph();
  for (size_t i = 0; i < graphs.size(); ++i)
    if (!graphs[i])
      throw TraceError("trace " + std::to_string(g.trace_id()) + " has no graph for invoke " + std::to_string(i));
  dsl::validate_trace(graphs);
  check_trace(graphs, *ctx.structure);
}

}  // namespace nnsight::tracing
