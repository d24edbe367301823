// The body of POST /v1/traces, read into the engine's requests after every
// static check. Two forms (docs/server.md):
//   - graphs as data, the way `nnsight trace` takes them:
//       {"prompts": ["..."] | "prompt_token_ids": [[...]], "sampling_params": {...},
//        "graphs": [<graph JSON, docs/ir.md> | "<the JSON text of a graph file>"],
//        "graph_names": ["patch.json"]}
//     one graph for every prompt or one per prompt; messages name the graph
//     ("patch.json:12:7" when its text and name are given);
//   - traces recorded by a C++ client: {"invokes": [{"prompt" | "prompt_token_ids",
//     "sampling_params", "invoke_index", "payload": "<base64 binary payload>"}]}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsl/graph.h"
#include "dsl/limits.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::server {

struct TraceRequest {
  std::vector<runner::RequestInput> requests;  // checked, traced, with `trace_id`
  std::vector<std::string> prompts;            // each prompt's text ("" for token ids), in the order given
  std::vector<size_t> prompt_of;               // request r runs prompt prompt_of[r]
  int64_t max_tokens = 0;                      // summed over the requests
};

// Throws HttpError 400 with the checks' own message (node, op, place).
// `edits` (the request's named edits, EditRegistry) run first.
TraceRequest parse_trace_request(const nlohmann::json& body, const runner::ModelStructure& structure,
                                 const dsl::Limits& limits, uint64_t trace_id,
                                 const std::vector<dsl::Graph>& edits = {});

}  // namespace nnsight::server
