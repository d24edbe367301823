#include "core/untrusted_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

// Deepest [ / { nesting outside strings; the scan is linear and needs no stack.
int max_depth(const char* data, size_t size) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < size; ++i) {
    char c = data[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

nlohmann::json parse_untrusted_json(const char* data, size_t size, const std::string& what) {
  if (max_depth(data, size) > kMaxJsonDepth) {
    throw LoadError(what + ": JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  try {
    return nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception& e) {
    throw LoadError(what + ": not valid JSON (" + e.what() + ")");
  }
}

nlohmann::json read_untrusted_json_file(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(path + ": cannot open");
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) throw LoadError(path + ": cannot read");
  if (static_cast<uint64_t>(size) > max_bytes) {
    throw LoadError(path + ": " + std::to_string(size) + " bytes is larger than the " + std::to_string(max_bytes) +
                    "-byte limit for this JSON file");
  }
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(&text[0], size);
  if (!in) throw LoadError(path + ": read failed");
  return parse_untrusted_json(text.data(), text.size(), path);
}

}  // namespace nnsight
