#include "front/trace_worker/recorded_trace.h"

#include <map>
#include <set>
#include <string>

#include <nnsight/error.hpp>

#include "dsl/errors.h"
#include "dsl/validate.h"
#include "front/trace_worker/persistent_edits.h"
#include "front/trace_worker/schedule_check.h"
#include "front/trace_worker/trace_payload.h"

namespace nnsight::tracing {

std::vector<runner::RequestInput> prepare_recorded_trace(const runner::ModelStructure& structure,
                                                         std::vector<runner::RequestInput> requests,
                                                         const dsl::Limits& limits, uint64_t trace_id,
                                                         const std::vector<dsl::Graph>& edits) {
  if (requests.empty()) throw TraceError("a trace needs at least one request");
  std::vector<TracePayload> payloads;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string where = "request " + std::to_string(i);
    try {
      payloads.push_back(decode_payload(requests[i].params.payload(), limits));
    } catch (const dsl::DecodeError& e) {
      throw TraceError(where + ": " + e.what());
    }
    const TracePayload& p = payloads.back();
    if (p.num_requests != requests.size())
      throw TraceError(where + ": its payload belongs to a trace of " + std::to_string(p.num_requests) +
                       " requests, but " + std::to_string(requests.size()) + " were sent");
    if (p.num_invokes != payloads.front().num_invokes)
      throw TraceError(where + ": the requests disagree on the trace's number of invokes");
    for (const auto& g : p.graphs)
      if (g.role == GraphRole::kPromptless && i != 0)
        throw TraceError(where + ": an invoke without a prompt rides on the first request only");
  }
  // Every invoke has exactly one main graph; save names are unique.
  const uint32_t num_invokes = payloads.front().num_invokes;
  std::vector<const dsl::Graph*> mains(num_invokes, nullptr);
  // An invoke over several prompts has one request per prompt, contiguous;
  // its graphs ride on the first, the others carry none.
  std::set<int32_t> seen_invokes;
  std::map<std::string, std::string> names;
  for (size_t i = 0; i < payloads.size(); ++i) {
    const int32_t invoke = requests[i].params.invoke_index();
    const bool continues = i > 0 && requests[i - 1].params.invoke_index() == invoke;
    if (invoke < 0 || static_cast<uint32_t>(invoke) >= num_invokes ||
        (!continues && !seen_invokes.insert(invoke).second))
      throw TraceError("request " + std::to_string(i) + ": invoke index " + std::to_string(invoke) +
                       " is out of range, or its requests are not contiguous");
    if (continues != payloads[i].graphs.empty())
      throw TraceError("request " + std::to_string(i) +
                       (continues ? ": a further prompt of an invoke carries graphs"
                                  : ": the first request of an invoke has no graph"));
    for (const auto& g : payloads[i].graphs) {
      if (g.role != GraphRole::kAuxiliary) {
        if (g.graph.invoke >= num_invokes || mains[g.graph.invoke] != nullptr)
          throw TraceError("request " + std::to_string(i) + ": a second graph for invoke " +
                           std::to_string(g.graph.invoke));
        mains[g.graph.invoke] = &g.graph;
      }
      for (const auto& n : g.graph.nodes) {
        if (n.kind != dsl::NodeKind::Save) continue;
        auto [it, fresh] = names.emplace(n.name, n.loc.str());
        if (!fresh) throw TraceError(n.loc.str() + ": the save name '" + n.name + "' is already used at " + it->second);
      }
    }
  }
  for (uint32_t k = 0; k < num_invokes; ++k)
    if (!mains[k]) throw TraceError("the trace has no graph for invoke " + std::to_string(k));
  try {
    dsl::validate_trace(mains);
  } catch (const dsl::ValidationError& e) {
    throw TraceError(std::string(e.what()));
  }
  check_trace(mains, structure);
  for (const auto& p : payloads)
    for (const auto& g : p.graphs)
      if (g.role == GraphRole::kAuxiliary) check_graph(g.graph, structure);

  // The payload bytes were checked above and pass through as they came
  // (with edits, they are written again with the edits first).
  add_edits(payloads, requests, edits);
  for (size_t i = 0; i < requests.size(); ++i)
    apply_trace_policy(requests[i].params, payloads[i], trace_id, requests[i].params.invoke_index());
  share_gradients(requests);
  return requests;
}

}  // namespace nnsight::tracing
