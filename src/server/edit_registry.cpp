#include "server/edit_registry.h"

#include <cctype>

#include <nnsight/error.hpp>

#include "dsl/base64.h"
#include "dsl/binary_codec.h"
#include "dsl/errors.h"
#include "front/trace_client/graph_file.h"
#include "front/trace_worker/persistent_edits.h"
#include "server/http_error.h"

namespace nnsight::server {
namespace {

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

nlohmann::json EditRegistry::add(const std::string& tenant, const nlohmann::json& body) {
  if (!body.is_object()) throw HttpError(400, "the body must be a JSON object");
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "name" && it.key() != "graph" && it.key() != "graph_binary")
      throw HttpError(400,
                      "unknown field '" + it.key() + "' in the edit (give \"name\" and \"graph\" or \"graph_binary\")");
  if (!body.contains("name") || !body["name"].is_string() || !valid_name(body["name"].get<std::string>()))
    throw HttpError(400, "\"name\" must be 1 to 64 letters, digits, '-', '_' or '.'");
  const std::string name = body["name"].get<std::string>();
  if (body.contains("graph") == body.contains("graph_binary"))
    throw HttpError(400, "edit '" + name + "': give one of \"graph\" (JSON, docs/ir.md) and \"graph_binary\" (base64)");
  const std::string what = "edit '" + name + "'";
  tracing::GraphFile file;
  try {
    if (body.contains("graph")) {
      const auto& g = body["graph"];
      file = tracing::parse_graph_file(what, g.is_string() ? g.get<std::string>() : g.dump(), limits_);
    } else {
      if (!body["graph_binary"].is_string()) throw HttpError(400, what + ": \"graph_binary\" must be a base64 string");
      file.path = what;
      file.graph =
          dsl::decode_binary(dsl::base64_decode(body["graph_binary"].get<std::string>(), "graph_binary"), limits_);
    }
    if (!file.prompts.empty()) throw HttpError(400, what + ": an edit runs on every prompt; it names no \"prompts\"");
    file.graph.invoke = 0;
    tracing::validate_graph_file(file, limits_);
    tracing::check_edit(file.graph, structure_, what);
  } catch (const HttpError&) {
    throw;
  } catch (const std::exception& e) {  // DecodeError, TraceError: the checks' own messages
    throw HttpError(400, e.what());
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto& mine = edits_[tenant];
  if (mine.count(name))
    throw HttpError(
        409, "an edit named '" + name + "' already exists for this API key (DELETE /v1/edits/" + name + " first)");
  if (mine.size() >= kMaxEditsPerKey)
    throw HttpError(429, "this API key has " + std::to_string(mine.size()) + " edits, the most a key may keep " +
                             "(delete one with DELETE /v1/edits/{name})");
  Edit& e = mine[name];
  e.graph = std::move(file.graph);
  e.created = unix_now();
  return describe(name, e);
}

nlohmann::json EditRegistry::describe(const std::string& name, const Edit& e) const {
  return {{"id", name}, {"object", "edit"}, {"nodes", e.graph.nodes.size()}, {"created", e.created}};
}

nlohmann::json EditRegistry::list(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json data = nlohmann::json::array();
  auto it = edits_.find(tenant);
  if (it != edits_.end())
    for (const auto& [name, e] : it->second) data.push_back(describe(name, e));
  return {{"object", "list"}, {"data", data}};
}

nlohmann::json EditRegistry::describe(const std::string& tenant, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = edits_.find(tenant);
  if (it == edits_.end() || !it->second.count(name))
    throw HttpError(404, "no edit named '" + name + "' for this API key");
  return describe(name, it->second.at(name));
}

void EditRegistry::remove(const std::string& tenant, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = edits_.find(tenant);
  if (it == edits_.end() || it->second.erase(name) == 0)
    throw HttpError(404, "no edit named '" + name + "' for this API key");
}

std::string EditRegistry::known(const std::string& tenant) const {
  auto it = edits_.find(tenant);
  std::string out;
  if (it != edits_.end())
    for (const auto& [name, e] : it->second) out += (out.empty() ? "'" : ", '") + name + "'";
  return out.empty() ? "none" : out;
}

std::vector<dsl::Graph> EditRegistry::graphs(const std::string& tenant, const nlohmann::json& names) const {
  if (!names.is_array()) throw HttpError(400, "\"edits\" must be a list of edit names");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = edits_.find(tenant);
  std::vector<dsl::Graph> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].is_string()) throw HttpError(400, "edits[" + std::to_string(i) + "] must be an edit's name");
    const std::string name = names[i].get<std::string>();
    if (it == edits_.end() || !it->second.count(name))
      throw HttpError(400, "edits[" + std::to_string(i) + "]: no edit named '" + name +
                               "' for this API key (its edits: " + known(tenant) +
                               "; register one with POST /v1/edits)");
    out.push_back(it->second.at(name).graph);
  }
  return out;
}

}  // namespace nnsight::server
