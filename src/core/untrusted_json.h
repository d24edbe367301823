// Parsing JSON that comes from a user's file (a safetensors header, a
// config.json): the parse never exhausts the stack and every failure is a
// LoadError naming the file.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>

namespace nnsight {

// Deepest nesting of arrays/objects accepted; real files use 3 or 4 levels.
constexpr int kMaxJsonDepth = 64;

// Throws LoadError("<what>: ...") when the text is not JSON or nests deeper
// than kMaxJsonDepth.
nlohmann::json parse_untrusted_json(const char* data, size_t size, const std::string& what);

// Reads and parses a whole file, refusing files larger than `max_bytes`.
nlohmann::json read_untrusted_json_file(const std::string& path, size_t max_bytes);

}  // namespace nnsight
