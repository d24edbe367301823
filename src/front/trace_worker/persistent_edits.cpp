#include "front/trace_worker/persistent_edits.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "dsl/node.h"
#include "front/trace_worker/schedule_check.h"

namespace nnsight::tracing {

void check_edit(const dsl::Graph& edit, const runner::ModelStructure& structure, const std::string& what) {
  for (const auto& n : edit.nodes) {
    if (n.kind == dsl::NodeKind::Save)
      throw TraceError(n.loc.str() + ": " + what + " saves a value ('" + n.name +
                       "'); an edit runs in every later trace and cannot save: save in the trace instead");
    if (n.kind == dsl::NodeKind::External)
      throw TraceError(n.loc.str() + ": " + what + " uses a value of another invoke; an edit is one invoke of its own");
  }
  check_graph(edit, structure);
}

void shift_invokes(dsl::Graph& graph, uint32_t count) {
  graph.invoke += count;
  for (auto& n : graph.nodes)
    if (n.kind == dsl::NodeKind::External) n.ext_invoke += count;
}

void add_edits(std::vector<TracePayload>& payloads, std::vector<runner::RequestInput>& requests,
               const std::vector<dsl::Graph>& edits) {
  TORCH_CHECK(payloads.size() == requests.size() && !payloads.empty(), "add_edits: one payload per request");
  if (edits.empty()) return;
  const auto count = static_cast<uint32_t>(edits.size());
  for (size_t r = 0; r < payloads.size(); ++r) {
    TracePayload& p = payloads[r];
    for (auto& g : p.graphs) shift_invokes(g.graph, count);
    p.num_invokes += count;
    if (r == 0) {
      std::vector<PayloadGraph> first;
      for (uint32_t k = 0; k < count; ++k) {
        first.push_back(PayloadGraph{GraphRole::kPromptless, edits[k]});
        first.back().graph.invoke = k;
      }
      for (auto& g : p.graphs) first.push_back(std::move(g));
      p.graphs = std::move(first);
    }
    requests[r].params.invoke_index(requests[r].params.invoke_index() + static_cast<int32_t>(count));
    requests[r].params.payload(encode_payload(p));
  }
}

}  // namespace nnsight::tracing
