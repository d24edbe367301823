#include "front/trace_client/trace_recorder.h"

#include <algorithm>
#include <set>

#include <nnsight/error.hpp>

#include "dsl/node.h"
#include "front/trace_worker/persistent_edits.h"
#include "front/trace_worker/schedule_check.h"
#include "front/trace_worker/trace_payload.h"

namespace nnsight::tracing {

namespace {
thread_local TraceRecorder* g_current = nullptr;
}

TraceRecorder* TraceRecorder::current() { return g_current; }
TraceRecorder::Scope::Scope(TraceRecorder* r) : prev_(g_current) { g_current = r; }
TraceRecorder::Scope::~Scope() { g_current = prev_; }

TraceRecorder::TraceRecorder(const runner::ModelStructure& structure, SamplingParams params, uint64_t trace_id,
                             std::vector<dsl::Graph> edits)
    : structure_(structure), params_(std::move(params)), trace_id_(trace_id), edits_(std::move(edits)) {
  for (size_t k = 0; k < edits_.size(); ++k) edits_[k].invoke = static_cast<uint32_t>(k);
}

void TraceRecorder::run_invoke(bool has_prompt, std::string prompt, std::vector<int32_t> ids,
                               const SamplingParams& params, const std::function<void()>& body, const SourceLoc& loc) {
  std::vector<std::string> prompts;
  std::vector<std::vector<int32_t>> token_ids;
  if (has_prompt) {
    prompts.push_back(std::move(prompt));
    token_ids.push_back(std::move(ids));
  }
  run_invoke(std::move(prompts), std::move(token_ids), params, body, loc);
}

void TraceRecorder::run_invoke(std::vector<std::string> prompts, std::vector<std::vector<int32_t>> ids,
                               const SamplingParams& params, const std::function<void()>& body, const SourceLoc& loc) {
  if (open_ >= 0) throw TraceError(loc.str() + ": invokes cannot be nested (an invoke is already open)");
  const size_t k = std::max(prompts.size(), ids.size());
  prompts.resize(k);
  ids.resize(k);
  Invoke inv;
  inv.builder = std::make_shared<dsl::GraphBuilder>(trace_id_, static_cast<uint32_t>(invokes_.size()));
  inv.has_prompt = k > 0;
  inv.prompts = std::move(prompts);
  inv.prompts_token_ids = std::move(ids);
  inv.params = params;
  invokes_.push_back(std::move(inv));
  open_ = static_cast<int64_t>(invokes_.size()) - 1;
  struct Close {
    int64_t& open;
    ~Close() { open = -1; }
  } close{open_};
  dsl::GraphBuilder::Scope scope(invokes_.back().builder.get());
  if (body) body();
}

TraceRecorder::Invoke& TraceRecorder::invoke(const SourceLoc& loc) {
  if (open_ < 0) throw TraceError(loc.str() + ": no invoke is open here (use tracer.invoke(...) in the trace body)");
  return invokes_[static_cast<size_t>(open_)];
}

dsl::StepSpec TraceRecorder::step_for(const std::string& key, const SourceLoc& loc) {
  Invoke& inv = invoke(loc);
  auto& frame = inv.cursors.back();
  auto it = frame.find(key);
  const int64_t off = it == frame.end() ? 0 : it->second;
  return inv.iter_depth > 0 ? dsl::StepSpec::iter(off) : dsl::StepSpec::fixed(off);
}

void TraceRecorder::advance(const std::string& key, const SourceLoc& loc) { ++invoke(loc).cursors.back()[key]; }

void TraceRecorder::push_iteration(const SourceLoc& loc) {
  Invoke& inv = invoke(loc);
  inv.cursors.emplace_back();
  ++inv.iter_depth;
}

void TraceRecorder::pop_iteration(const SourceLoc& loc) {
  Invoke& inv = invoke(loc);
  inv.cursors.pop_back();
  --inv.iter_depth;
}

dsl::NodeId TraceRecorder::node_of(const Operand& o, const SourceLoc& loc) {
  auto b = builder(loc);
  switch (o.kind()) {
    case Operand::Kind::Proxy:
      if (!o.proxy().valid()) throw TraceError(loc.str() + ": an empty proxy is used");
      return b->import(*o.proxy().builder(), o.proxy().node(), loc);
    case Operand::Kind::Tensor:
      return b->constant(dsl::Value(o.tensor().detach().clone()), loc);
    case Operand::Kind::Int:
      return b->constant(dsl::Value::integer(o.int_value()), loc);
    case Operand::Kind::Double:
      return b->constant(dsl::Value::real(o.double_value()), loc);
    case Operand::Kind::Bool:
      return b->constant(dsl::Value::boolean(o.bool_value()), loc);
  }
  throw TraceError(loc.str() + ": unsupported operand");
}

std::vector<runner::RequestInput> TraceRecorder::finish(const SourceLoc& loc) {
  if (invokes_.empty()) throw TraceError(loc.str() + ": the trace has no invoke");
  std::vector<dsl::Graph> mains;
  std::vector<std::vector<dsl::Graph>> aux;
  for (auto& inv : invokes_) {
    mains.push_back(inv.builder->finish());
    aux.emplace_back();
    for (auto& a : inv.auxiliary) aux.back().push_back(a->finish());
  }
  // Save names are how results are found: unique across the whole trace.
  std::map<std::string, SourceLoc> names;
  auto collect = [&](const dsl::Graph& g) {
    for (const auto& n : g.nodes) {
      if (n.kind != dsl::NodeKind::Save) continue;
      auto [it, fresh] = names.emplace(n.name, n.loc);
      if (!fresh)
        throw TraceError(n.loc.str() + ": the save name '" + n.name + "' is already used at " + it->second.str());
    }
  };
  for (size_t i = 0; i < mains.size(); ++i) {
    collect(mains[i]);
    for (const auto& a : aux[i]) collect(a);
  }
  // The trace's invokes come after its edits (their mediators run first).
  const auto num_edits = static_cast<uint32_t>(edits_.size());
  for (auto& g : mains) shift_invokes(g, num_edits);
  for (auto& list : aux)
    for (auto& a : list) shift_invokes(a, num_edits);
  std::vector<const dsl::Graph*> ptrs;
  for (const auto& g : edits_) ptrs.push_back(&g);
  for (const auto& g : mains) ptrs.push_back(&g);
  check_trace(ptrs, structure_);
  for (const auto& list : aux)
    for (const auto& a : list) check_graph(a, structure_);

  uint32_t num_requests = 0;
  for (const auto& inv : invokes_) num_requests += static_cast<uint32_t>(inv.prompts.size());
  if (num_requests == 0) throw TraceError(loc.str() + ": the trace has no invoke with a prompt");
  std::vector<runner::RequestInput> requests;
  bool first = true;
  for (size_t i = 0; i < invokes_.size(); ++i) {
    const Invoke& inv = invokes_[i];
    if (!inv.has_prompt) continue;
    TracePayload p;
    p.num_requests = num_requests;
    p.num_invokes = num_edits + static_cast<uint32_t>(invokes_.size());
    p.graphs.push_back(PayloadGraph{GraphRole::kInvoke, mains[i]});
    for (const auto& a : aux[i]) p.graphs.push_back(PayloadGraph{GraphRole::kAuxiliary, a});
    if (first) {
      // Edits and invokes without a prompt ride on the trace's first request.
      for (const auto& e : edits_) p.graphs.push_back(PayloadGraph{GraphRole::kPromptless, e});
      for (size_t j = 0; j < invokes_.size(); ++j)
        if (!invokes_[j].has_prompt) p.graphs.push_back(PayloadGraph{GraphRole::kPromptless, mains[j]});
      first = false;
    }
    runner::RequestInput in;
    in.prompt = inv.prompts[0];
    in.prompt_token_ids = inv.prompts_token_ids[0];
    in.params = inv.params;
    make_traced(in.params, p, trace_id_, static_cast<int32_t>(num_edits + i));
    requests.push_back(std::move(in));
    // Its further prompts: requests of the same invoke without graphs (they
    // run on the first's mediators, which see every prompt's rows).
    for (size_t k = 1; k < inv.prompts.size(); ++k) {
      TracePayload more;
      more.num_requests = num_requests;
      more.num_invokes = p.num_invokes;
      runner::RequestInput extra;
      extra.prompt = inv.prompts[k];
      extra.prompt_token_ids = inv.prompts_token_ids[k];
      extra.params = inv.params;
      make_traced(extra.params, more, trace_id_, static_cast<int32_t>(num_edits + i));
      requests.push_back(std::move(extra));
    }
  }
  share_gradients(requests);
  return requests;
}

dsl::Graph TraceRecorder::finish_edit(const SourceLoc& loc) {
  TORCH_CHECK(invokes_.size() == 1 && !invokes_[0].has_prompt, "an edit records one invoke without a prompt");
  if (!invokes_[0].auxiliary.empty())
    throw TraceError(loc.str() + ": an edit cannot use tracer.cache() (an edit cannot save: cache in the trace)");
  dsl::Graph g = invokes_[0].builder->finish();
  check_edit(g, structure_, "the edit");
  return g;
}

}  // namespace nnsight::tracing
