#include "front/trace_client/graph_file.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "dsl/errors.h"
#include "dsl/json_codec.h"
#include "dsl/validate.h"

namespace nnsight::tracing {
namespace {

// The JSON pointer a DecodeError message names ("graph JSON at /nodes/3/args: ...").
std::string pointer_in(const std::string& message) {
  const std::string marker = "graph JSON at ";
  const size_t at = message.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const size_t end = message.find_first_of(" :", start);
  return message.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string location(const std::string& path, const dsl::TextPosition& p) {
  return path + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

// The file's top-level "prompts" (not part of the graph IR: which prompts of a
// trace the graph runs over), removed from the JSON the graph is decoded from.
// Returns the JSON without it, or "" when the file names none.
std::string take_prompts(const std::string& path, const std::string& text, const dsl::Limits& limits,
                         std::vector<size_t>& prompts) {
  if (text.size() > limits.max_encoded_bytes || text.find("\"prompts\"") == std::string::npos) return "";
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("prompts")) return "";  // syntax errors are reported by the decoder
  const nlohmann::json& v = j["prompts"];
  auto bad = [&](const std::string& what) {
    const auto pos = dsl::locate(text, "/prompts");
    throw dsl::DecodeError((pos ? location(path, *pos) : path) + ": \"prompts\" " + what);
  };
  if (!v.is_array() || v.empty()) bad("must be a non-empty list of prompt indices");
  for (const auto& i : v) {
    if (!i.is_number_unsigned()) bad("must hold prompt indices (integers >= 0), got " + i.dump());
    prompts.push_back(i.get<size_t>());
  }
  j.erase("prompts");
  return j.dump();
}

}  // namespace

std::string GraphFile::where(dsl::NodeId node) const {
  if (node >= node_positions.size()) return path;
  return location(path, node_positions[node]);
}

GraphFile parse_graph_file(const std::string& path, const std::string& text, const dsl::Limits& limits) {
  GraphFile f;
  f.path = path;
  const std::string without_prompts = take_prompts(path, text, limits, f.prompts);
  try {
    f.graph = dsl::from_json(without_prompts.empty() ? text : without_prompts, limits);
  } catch (const dsl::DecodeError& e) {
    const std::string msg = e.what();
    std::string pointer = pointer_in(msg);
    if (pointer == "/") pointer.clear();
    if (!pointer.empty() || msg.find("graph JSON at /") != std::string::npos) {
      // The element may be missing (a required field): fall back to its parent.
      for (std::string p = pointer;; p = p.substr(0, p.rfind('/'))) {
        if (auto pos = dsl::locate(text, p)) throw dsl::DecodeError(location(path, *pos) + ": " + msg);
        if (p.empty()) break;
      }
    }
    // A syntax error names its byte offset.
    const std::string marker = "syntax error at byte ";
    if (const size_t at = msg.find(marker); at != std::string::npos) {
      size_t byte = 0;
      for (size_t i = at + marker.size(); i < msg.size() && msg[i] >= '0' && msg[i] <= '9'; ++i)
        byte = byte * 10 + static_cast<size_t>(msg[i] - '0');
      // nlohmann counts the offending byte from 1.
      throw dsl::DecodeError(location(path, dsl::position_of(text, byte > 0 ? byte - 1 : 0)) + ": " + msg);
    }
    throw dsl::DecodeError(path + ": " + msg);
  }
  f.node_positions = dsl::locate_elements(text, "/nodes");
  for (size_t i = 0; i < f.graph.nodes.size(); ++i) {
    auto& loc = f.graph.nodes[i].loc;
    loc.file = path;
    loc.line = i < f.node_positions.size() ? static_cast<uint32_t>(f.node_positions[i].line) : 0;
  }
  return f;
}

GraphFile load_graph_file(const std::string& path, const dsl::Limits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the graph file " + path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error("cannot read the graph file " + path);
  if (static_cast<uint64_t>(size) > limits.max_encoded_bytes)
    throw dsl::DecodeError(path + ": " + std::to_string(size) + " bytes exceed the graph size limit of " +
                           std::to_string(limits.max_encoded_bytes));
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) throw Error("cannot read the graph file " + path);
  return parse_graph_file(path, text, limits);
}

void validate_graph_file(const GraphFile& file, const dsl::Limits& limits) {
  try {
    dsl::validate(file.graph, dsl::ValidateOptions().with_limits(limits));
  } catch (const dsl::ValidationError& e) {
    throw TraceError(file.where(e.node()) + ": " + e.what());
  }
}

}  // namespace nnsight::tracing
