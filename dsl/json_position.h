// Where things are in a JSON text: the line and column of the element a JSON
// pointer names, so that messages about a hand-written graph file can say
// "graph.json:12:7". nlohmann::json keeps no positions; this scans the text
// again (it never allocates more than the answer and never recurses).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nnsight::dsl {

struct TextPosition {
  size_t offset = 0;  // bytes from the start
  size_t line = 1;    // 1-based
  size_t column = 1;  // 1-based, in code points
};

// The position of offset `offset` in `text`.
TextPosition position_of(std::string_view text, size_t offset);

// The start of the value that `pointer` (RFC 6901, "/nodes/3/args/0"; "" is
// the whole document) names in the JSON `text`, or nullopt when the text is
// not valid JSON along the way or has no such element.
std::optional<TextPosition> locate(std::string_view text, std::string_view pointer);

// The starts of the elements of the array that `pointer` names, in order
// (one pass over the text); empty when there is no such array.
std::vector<TextPosition> locate_elements(std::string_view text, std::string_view pointer);

}  // namespace nnsight::dsl
