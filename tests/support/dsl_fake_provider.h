// A Provider for DSL tests: values are looked up in a table (or made up
// deterministically from the key and step), and every set, save and stop is
// recorded so tests can check what a graph did.
#pragma once

#include "dsl/evaluate.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nnsight::testing {

class FakeProvider : public dsl::Provider {
 public:
  // Value returned for (key, step); takes precedence over the default.
  void put(const std::string& key, int64_t step, dsl::Value v) { values_[{key, step}] = std::move(v); }
  // Value returned for key at every step that has no entry of its own.
  void put_all_steps(const std::string& key, dsl::Value v) { all_steps_[key] = std::move(v); }
  // Keys with no entry get a deterministic [2, 4] float tensor when true.
  void set_default_tensors(bool on) { default_tensors_ = on; }
  // Steps >= n throw RequestFinished (the request generated n steps).
  void finish_at(int64_t n) { finish_at_ = n; }
  // Value the provider returns for External(invoke, node).
  void put_external(uint32_t invoke, dsl::NodeId node, dsl::Value v) { externals_[{invoke, node}] = std::move(v); }

  dsl::Value get(const ProviderKey& key, int64_t step) override;
  void set(const ProviderKey& key, int64_t step, dsl::Value value) override;
  void save(const std::string& name, const dsl::Value& value, dsl::SaveMode mode) override;
  dsl::Value external(uint32_t invoke, dsl::NodeId node) override;
  void stop() override { ++stops; }
  // A `call`: records the module and returns 3 * x + 1 (a stand-in for the module).
  dsl::Value call(const std::string& module, const dsl::Value& arg) override;
  // A `backward`: plain autograd from the metric to the inputs (zeros where unused).
  std::vector<at::Tensor> backward(const at::Tensor& metric, const std::vector<at::Tensor>& inputs) override;
  int backwards = 0;

  // What happened.
  std::vector<std::pair<std::string, int64_t>> gets;
  std::vector<std::tuple<std::string, int64_t, dsl::Value>> sets;
  std::map<std::string, dsl::Value> saves;  // append mode: a list value
  int stops = 0;
  std::vector<std::string> calls;

  // The deterministic default for (key, step).
  static at::Tensor default_tensor(const std::string& key, int64_t step);

 private:
  std::map<std::pair<std::string, int64_t>, dsl::Value> values_;
  std::map<std::string, dsl::Value> all_steps_;
  std::map<std::pair<uint32_t, dsl::NodeId>, dsl::Value> externals_;
  std::optional<int64_t> finish_at_;
  bool default_tensors_ = true;
};

}  // namespace nnsight::testing
