// GraphFile: an intervention graph read from a JSON file in the documented
// form (docs/ir.md), remembering where each node is written, so that every
// message about a node -- decoding, validation, schedule checks, errors while
// it runs next to the model -- points into the file: "patch.json:12:7".
#pragma once

#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/json_position.h"
#include "dsl/limits.h"

namespace nnsight::tracing {

struct GraphFile {
  std::string path;
  dsl::Graph graph;
  std::vector<dsl::TextPosition> node_positions;  // where each node's object starts
  // The optional top-level "prompts": [i, ...] (indices into the trace's
  // prompts): the graph is one invoke over those prompts (docs/cli.md).
  // Empty when the file does not name any.
  std::vector<size_t> prompts;

  // "patch.json:12:7" for a node, or the path alone when unknown.
  std::string where(dsl::NodeId node) const;
};

// Decodes `text` (read from `path`). Each node's source location becomes its
// place in the file (path and line), replacing a "loc" field the JSON may hold.
// Throws dsl::DecodeError prefixed with "path:line:column: " where the JSON
// names an element.
GraphFile parse_graph_file(const std::string& path, const std::string& text, const dsl::Limits& limits = dsl::Limits());
// Reads the file first; nnsight::Error when it cannot be read.
GraphFile load_graph_file(const std::string& path, const dsl::Limits& limits = dsl::Limits());

// Validates the graph alone (ops, kinds, blocks, limits); a ValidationError
// is rethrown as a TraceError that starts with the node's "path:line:column".
void validate_graph_file(const GraphFile& file, const dsl::Limits& limits = dsl::Limits());

}  // namespace nnsight::tracing
