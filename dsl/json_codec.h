// The JSON form of a graph (documented with examples in docs/ir.md). It holds
// exactly what the binary form holds, so binary -> JSON -> binary is
// byte-identical; graphs can be written by hand, checked into tests, or
// produced by clients in other languages.
//
// Tensors are {"dtype": "float32", "shape": [2, 3], "data_b64": "..."} (raw
// little-endian bytes); hand-written JSON may give "data": [numbers] instead.
// Errors name the node index and the JSON pointer of the offending element.
#pragma once

#include "dsl/graph.h"
#include "dsl/limits.h"

#include <string>
#include <string_view>

namespace nnsight::dsl {

inline constexpr const char* kGraphJsonFormat = "nnsight.graph";

// indent < 0: one line; otherwise pretty-printed with that indent.
std::string to_json(const Graph& g, int indent = -1);
// Throws DecodeError on malformed JSON, unknown fields, wrong field types, or
// sizes beyond the limits. Does not validate the graph's meaning.
Graph from_json(std::string_view text, const Limits& limits = Limits());

}  // namespace nnsight::dsl
