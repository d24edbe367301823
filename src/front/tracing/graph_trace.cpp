#include "front/tracing/graph_trace.h"

#include <atomic>
#include <map>

#include <nnsight/error.hpp>

#include "dsl/errors.h"
#include "dsl/validate.h"
#include "front/tracing/collect_trace_result.h"
#include "front/tracing/interrupt.h"
#include "front/tracing/schedule_check.h"
#include "front/tracing/trace_payload.h"
#include "runner/engine/async_engine.h"
#include "runner/engine/llm_access.h"

namespace nnsight::tracing {
namespace {
std::atomic<uint64_t> g_next_trace{uint64_t{1} << 48};
}  // namespace

uint64_t next_trace_id() { return g_next_trace.fetch_add(1); }

std::vector<runner::RequestInput> prepare_graph_trace(const runner::ModelStructure& structure,
                                                      std::vector<runner::RequestInput> prompts,
                                                      const std::vector<GraphFile>& graphs,
                                                      const SamplingParams& params, uint64_t trace_id) {
  if (prompts.empty()) throw TraceError("a graph trace needs at least one prompt");
  if (graphs.size() != 1 && graphs.size() != prompts.size())
    throw TraceError("give one graph for all prompts or one per prompt: " + std::to_string(graphs.size()) +
                     " graphs for " + std::to_string(prompts.size()) + " prompts");
  params.validate();
  const bool shared = graphs.size() == 1 && prompts.size() > 1;

  // One graph per invoke, with its invoke index (and, when shared, its saves renamed).
  std::vector<dsl::Graph> mains;
  std::vector<const GraphFile*> files;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GraphFile& f = graphs[shared ? 0 : i];
    validate_graph_file(f);
    dsl::Graph g = f.graph;
    g.invoke = static_cast<uint32_t>(i);
    if (shared)
      for (auto& n : g.nodes)
        if (n.kind == dsl::NodeKind::Save) n.name = std::to_string(i) + "/" + n.name;
    mains.push_back(std::move(g));
    files.push_back(&f);
  }
  // Saves are found by name: unique across the trace.
  std::map<std::string, std::string> names;
  for (size_t i = 0; i < mains.size(); ++i) {
    for (size_t k = 0; k < mains[i].nodes.size(); ++k) {
      const auto& n = mains[i].nodes[k];
      if (n.kind != dsl::NodeKind::Save) continue;
      const std::string here = files[i]->where(static_cast<dsl::NodeId>(k));
      auto [it, fresh] = names.emplace(n.name, here + " (prompt " + std::to_string(i) + ")");
      if (!fresh)
        throw TraceError(here + ": the save name '" + n.name + "' of prompt " + std::to_string(i) +
                         " is already used at " + it->second);
    }
  }
  std::vector<const dsl::Graph*> ptrs;
  for (const auto& g : mains) ptrs.push_back(&g);
  try {
    dsl::validate_trace(ptrs);
  } catch (const dsl::ValidationError& e) {
    throw TraceError(std::string(e.what()));
  }
  check_trace(ptrs, structure);

  std::vector<runner::RequestInput> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    TracePayload p;
    p.num_requests = static_cast<uint32_t>(prompts.size());
    p.num_invokes = static_cast<uint32_t>(prompts.size());
    p.graphs.push_back(PayloadGraph{GraphRole::kInvoke, mains[i]});
    runner::RequestInput in = std::move(prompts[i]);
    in.params = params;
    make_traced(in.params, p, trace_id, static_cast<int32_t>(i));
    requests.push_back(std::move(in));
  }
  return requests;
}

namespace {

// prompts[i] holds the text or the token ids of invoke i.
TraceResult run(LLM& llm, std::vector<runner::RequestInput> prompts, const std::vector<GraphFile>& graphs,
                const SamplingParams& params) {
  runner::AsyncEngine& engine = runner::LLMAccess::engine(llm);
  std::vector<runner::RequestInput> requests =
      prepare_graph_trace(engine.model_structure(), std::move(prompts), graphs, params, next_trace_id());
  const uint64_t submitted_at = interrupt_count();
  return collect_trace_result(engine, engine.submit_group(std::move(requests)), submitted_at);
}

}  // namespace

TraceResult run_graph_trace(LLM& llm, const std::vector<std::string>& prompts, const std::vector<GraphFile>& graphs,
                            const SamplingParams& params) {
  std::vector<runner::RequestInput> in(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) in[i].prompt = prompts[i];
  return run(llm, std::move(in), graphs, params);
}

TraceResult run_graph_trace(LLM& llm, const std::vector<std::vector<int32_t>>& prompt_token_ids,
                            const std::vector<GraphFile>& graphs, const SamplingParams& params) {
  std::vector<runner::RequestInput> in(prompt_token_ids.size());
  for (size_t i = 0; i < prompt_token_ids.size(); ++i) {
    if (prompt_token_ids[i].empty()) throw TraceError("prompt " + std::to_string(i) + " has no token ids");
    in[i].prompt_token_ids = prompt_token_ids[i];
  }
  return run(llm, std::move(in), graphs, params);
}

}  // namespace nnsight::tracing
