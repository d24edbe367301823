#include "front/trace_client/graph_trace.h"

#include <atomic>
#include <map>

#include <nnsight/error.hpp>

#include "dsl/errors.h"
#include "dsl/validate.h"
#include "front/trace_client/submit_trace.h"
#include "front/trace_worker/persistent_edits.h"
#include "front/trace_worker/schedule_check.h"
#include "front/trace_worker/trace_payload.h"
#include "runner/engine/async_engine.h"
#include "runner/engine/llm_access.h"

namespace nnsight::tracing {
namespace {

// Trace ids of graph traces: far from the ones LanguageModel counts up from 1,
// so both may share an engine.
std::atomic<uint64_t> g_next_trace{uint64_t{1} << 48};

}  // namespace

std::vector<std::vector<size_t>> invoke_prompts(const std::vector<GraphFile>& graphs, size_t num_prompts) {
  if (num_prompts == 0) throw TraceError("a graph trace needs at least one prompt");
  size_t named = 0;
  for (const auto& f : graphs) named += f.prompts.empty() ? 0 : 1;
  std::vector<std::vector<size_t>> out;
  if (named == 0) {
    if (graphs.size() != 1 && graphs.size() != num_prompts)
      throw TraceError("give one graph for all prompts or one per prompt: " + std::to_string(graphs.size()) +
                       " graphs for " + std::to_string(num_prompts) + " prompts");
    for (size_t i = 0; i < num_prompts; ++i) out.push_back({i});
    return out;
  }
  // Graphs naming their "prompts": graph i is invoke i over those prompts, each prompt in exactly one.
  std::vector<const GraphFile*> owner(num_prompts, nullptr);
  for (const auto& f : graphs) {
    if (f.prompts.empty())
      throw TraceError(f.path + ": name this graph's \"prompts\" too (another graph of the trace names its own)");
    for (size_t p : f.prompts) {
      if (p >= num_prompts)
        throw TraceError(f.path + ": \"prompts\" names prompt " + std::to_string(p) + ", but the trace has " +
                         std::to_string(num_prompts));
      if (owner[p])
        throw TraceError(f.path + ": prompt " + std::to_string(p) + " is already run by " + owner[p]->path +
                         " (each prompt belongs to one graph)");
      owner[p] = &f;
    }
    out.push_back(f.prompts);
  }
  for (size_t p = 0; p < num_prompts; ++p)
    if (!owner[p]) throw TraceError("prompt " + std::to_string(p) + " is run by no graph (name it in a \"prompts\")");
  return out;
}

uint64_t next_trace_id() { return g_next_trace.fetch_add(1); }

PreparedGraphTrace prepare_graph_trace(const runner::ModelStructure& structure,
                                       std::vector<runner::RequestInput> prompts, const std::vector<GraphFile>& graphs,
                                       const SamplingParams& params, uint64_t trace_id,
                                       const std::vector<dsl::Graph>& edits) {
  // The prompts of each invoke.
  const std::vector<std::vector<size_t>> groups = invoke_prompts(graphs, prompts.size());
  params.validate();
  const bool shared = graphs.size() == 1 && groups.size() > 1;

  // One graph per invoke, with its invoke index (and, when shared, its saves renamed).
  std::vector<dsl::Graph> mains;
  std::vector<const GraphFile*> files;
  for (size_t i = 0; i < groups.size(); ++i) {
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
  // The trace's invokes come after its edits (edit k is invoke k).
  const auto num_edits = static_cast<uint32_t>(edits.size());
  std::vector<dsl::Graph> numbered_edits = edits;
  for (uint32_t k = 0; k < num_edits; ++k) numbered_edits[k].invoke = k;
  for (auto& g : mains) shift_invokes(g, num_edits);
  std::vector<const dsl::Graph*> ptrs;
  for (const auto& g : numbered_edits) ptrs.push_back(&g);
  for (const auto& g : mains) ptrs.push_back(&g);
  try {
    dsl::validate_trace(ptrs);
  } catch (const dsl::ValidationError& e) {
    throw TraceError(std::string(e.what()));
  }
  check_trace(ptrs, structure);

  PreparedGraphTrace out;
  for (size_t i = 0; i < groups.size(); ++i) {
    // An invoke over several prompts: its graph rides on its first prompt's request.
    for (size_t k = 0; k < groups[i].size(); ++k) {
      TracePayload p;
      p.num_requests = static_cast<uint32_t>(prompts.size());
      p.num_invokes = num_edits + static_cast<uint32_t>(groups.size());
      if (k == 0) p.graphs.push_back(PayloadGraph{GraphRole::kInvoke, mains[i]});
      // The edits ride on the trace's first request.
      if (i == 0 && k == 0)
        for (const auto& e : numbered_edits) p.graphs.push_back(PayloadGraph{GraphRole::kPromptless, e});
      runner::RequestInput in = std::move(prompts[groups[i][k]]);
      in.params = params;
      make_traced(in.params, p, trace_id, static_cast<int32_t>(num_edits + i));
      out.requests.push_back(std::move(in));
      out.prompt_of.push_back(groups[i][k]);
    }
  }
  share_gradients(out.requests);
  return out;
}

namespace {

// prompts[i] holds the text or the token ids of prompt i.
TraceResult run(LLM& llm, std::vector<runner::RequestInput> prompts, const std::vector<GraphFile>& graphs,
                const SamplingParams& params) {
  runner::AsyncEngine& engine = runner::LLMAccess::engine(llm);
  PreparedGraphTrace t =
      prepare_graph_trace(engine.model_structure(), std::move(prompts), graphs, params, next_trace_id());
  // Outputs in prompt order.
  return submit_trace(engine, std::move(t.requests), std::move(t.prompt_of)).get();
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
