// ModelStructure: the served model's hookable modules and the order in which
// one engine step produces provider values. The tracing layer uses it to
// resolve envoy paths ("did you mean ...?") and to reject interventions that
// read values out of order -- in the user's process, before any model time
// is spent, as well as on the workers.
//
// Provider keys: "<path>.input" (also ".inputs") before a module runs,
// "<path>.output" after; then "logits", "samples", "result".
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <absl/container/flat_hash_map.h>

#include "batching/batch_groups.h"
#include "core/provider_key.h"
#include "models/causal_lm.h"

namespace nnsight::runner {

// A value's shape and dtype as the start-up probe saw it (a forward of
// kProbeTokens tokens of one sequence): what a scan (LanguageModel::scan)
// derives every step's shapes from.
struct ProbedTensor {
  std::vector<int64_t> sizes;
  int8_t dtype = -1;  // a c10::ScalarType; -1: None (an undefined tuple element)
  bool defined() const { return dtype >= 0; }
};

struct ModuleInfo {
  std::string path;               // Hugging Face dotted path ("" for the root)
  std::string type_name;          // "LlamaMLP", "Linear", ...
  int32_t output_tuple_size = 0;  // 0: a tensor; n: a tuple of n (element 0 computed)
  // Rows of its input and output: one per token of the flat batch, or one per
  // sampling request (modules that run after the last-token selection: the LM head).
  batching::RowLevel row_level = batching::RowLevel::kToken;
  // Whether a graph may run it on a tensor of its own (a `call` node; Module::callable).
  bool callable = false;
  // Its positional inputs and its output (one, or a tuple's elements) in the
  // probe's forward; empty when it did not run there.
  std::vector<ProbedTensor> inputs, outputs;
};

class ModelStructure {
 public:
  static constexpr int64_t kProbeTokens = 2;  // the probe's forward: two tokens of one sequence

  ModelStructure() = default;
  ModelStructure(std::vector<ModuleInfo> modules, std::vector<std::string> events);

  // Records every module's input/output events of a two-token forward and
  // LM-head pass of `model` (the dry run writes two KV slots of `kv`'s block 0),
  // and the row level of each module's values (from their first dimension).
  static ModelStructure probe(CausalLM& model, std::vector<KVCache>& kv);

  // {"modules": [{"path", "type", "tuple", "rows", "callable"}], "events": [...],
  // "functions": [...]}: what a remote client's static checks need (the
  // server's /v1/models/{name}/structure).
  nlohmann::json to_json() const;
  // Throws nnsight::LoadError naming `what` for a malformed description.
  static ModelStructure from_json(const nlohmann::json& j, const std::string& what);

  const std::vector<ModuleInfo>& modules() const { return modules_; }
  // Provider keys in the order a step produces them (".inputs" shares ".input"'s place).
  const std::vector<std::string>& events() const { return events_; }
  const ModuleInfo* find_module(const std::string& path) const;
  // The row level of a provider key's values: "logits", "samples" and
  // "result" are per request; a module's values have its row_level.
  batching::RowLevel row_level(const ProviderKey& key) const;
  // Position of a provider key in events(), or -1 for an unknown key.
  int64_t order_of(const ProviderKey& key) const;
  // The known module path closest to `path` (edit distance), for messages.
  std::string closest_path(const std::string& path) const;

  // The user functions (`apply` nodes) the process that runs the model
  // registered, sorted; set by the tracing layer when the engine starts.
  const std::vector<std::string>& functions() const { return functions_; }
  void set_functions(std::vector<std::string> names) { functions_ = std::move(names); }
  bool has_function(const std::string& name) const;

  // The logits the probe's LM-head pass produced ([1, vocab]).
  const ProbedTensor& logits() const { return logits_; }
  void set_logits(ProbedTensor t) { logits_ = std::move(t); }
  // Mutable module entries, for decoders filling in the probed shapes.
  std::vector<ModuleInfo>& mutable_modules() { return modules_; }

 private:
  void index();
  std::vector<ModuleInfo> modules_;
  std::vector<std::string> events_;
  std::vector<std::string> functions_;
  ProbedTensor logits_;
  absl::flat_hash_map<ProviderKey, int64_t> order_;
  std::unordered_map<std::string, size_t> by_path_;
};

}  // namespace nnsight::runner
