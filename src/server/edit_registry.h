// EditRegistry: the named persistent edits of a server (NNsight's
// model.edit, kept on the server): a client registers an intervention graph
// under a name (POST /v1/edits), and a trace names the edits to run before
// its own graphs ("edits": ["name", ...] in POST /v1/traces). Edits belong to
// the API key that registered them: another key neither sees nor applies
// them, and gets the same 404/400 as for a name that does not exist.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsl/graph.h"
#include "dsl/limits.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::server {

class EditRegistry {
 public:
  static constexpr size_t kMaxEditsPerKey = 64;  // bounds a key's memory on the server

  EditRegistry(const runner::ModelStructure& structure, const dsl::Limits& limits)
      : structure_(structure), limits_(limits) {}

  // Registers the edit a POST /v1/edits body describes: {"name", "graph": <a
  // graph as JSON (docs/ir.md) or its text>} or {"name", "graph_binary":
  // "<base64 of the binary graph encoding>"}. The graph is checked as an
  // edit (no saves, the model's paths and order). Returns its description.
  // HttpError: 400 for a bad body or graph, 409 for a name the key already
  // uses, 429 over kMaxEditsPerKey.
  nlohmann::json add(const std::string& tenant, const nlohmann::json& body);
  // {"object": "list", "data": [description...]} of the key's edits, by name.
  nlohmann::json list(const std::string& tenant) const;
  // {"id": name, "object": "edit", "nodes", "created"}; HttpError 404.
  nlohmann::json describe(const std::string& tenant, const std::string& name) const;
  // HttpError 404 when the key has no such edit.
  void remove(const std::string& tenant, const std::string& name);
  // The graphs of `names` (a trace request's "edits": a list of strings), in
  // that order. HttpError 400 naming the first unknown one.
  std::vector<dsl::Graph> graphs(const std::string& tenant, const nlohmann::json& names) const;

 private:
  struct Edit {
    dsl::Graph graph;
    int64_t created = 0;  // unix seconds
  };
  nlohmann::json describe(const std::string& name, const Edit& e) const;
  std::string known(const std::string& tenant) const;  // mu_ held

  const runner::ModelStructure& structure_;
  dsl::Limits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, Edit>> edits_;  // tenant -> name -> edit
};

}  // namespace nnsight::server
