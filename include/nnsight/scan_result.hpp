// ScanResult: what LanguageModel::scan reports (NNsight's model.scan): the
// shape and dtype of every value a trace body touches -- module inputs and
// outputs, attention points, attached modules' points, logits, samples, and
// the values computed from them -- found without running the model.
//
//   Saved h;
//   ScanResult s = lm.scan("Hello", SamplingParams(), [&](Tracer&) {
//     h = lm.envoy("model.layers.3").output().save();
//   });
//   s[h].shape;   // {prompt tokens, 576}
//   std::cout << s;  // one line per value: where, what, dtype[shape]
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>

#include <nnsight/proxy.hpp>
#include <nnsight/saved.hpp>

namespace nnsight {

struct ScannedValue {
  uint32_t invoke = 0;  // the graph's invoke in the trace (persistent edits first)
  uint32_t node = 0;    // the node in its graph
  std::string what;     // "get model.layers.3.output (step 0)", "op mul", "save h"
  std::string where;    // the user's source line ("main.cpp:12")
  bool is_tensor = false;
  std::vector<int64_t> shape;  // a tensor's
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<ScannedValue> items;  // a tuple's elements (None: an undefined one)
  bool is_none = false;             // a tuple element that is None
  std::string kind;                 // a value that is no tensor: "int", "list of 3 values", ...

  // "float32[7, 32]", "tuple(float32[7, 32], None)", "int".
  std::string describe() const;
};

class ScanResult {
 public:
  ScanResult() = default;
  ScanResult(uint64_t trace_id, uint32_t num_edits, std::vector<ScannedValue> values,
             std::map<std::string, ScannedValue> saves)
      : trace_id_(trace_id), num_edits_(num_edits), values_(std::move(values)), saves_(std::move(saves)) {}

  // A proxy's value, recorded in the scanned body. Throws nnsight::Error for
  // a proxy of another trace, or one whose node never ran (a branch not taken).
  const ScannedValue& operator[](const Proxy& proxy) const;
  // A saved value (its shape when saved; a save_each: its last step's).
  const ScannedValue& operator[](const Saved& saved) const;
  bool has(const Proxy& proxy) const;

  // Every value, by invoke and node.
  const std::vector<ScannedValue>& values() const { return values_; }
  const std::map<std::string, ScannedValue>& saves() const { return saves_; }
  // One line per value.
  std::string str() const;

 private:
  const ScannedValue* find(const Proxy& proxy) const;
  uint64_t trace_id_ = 0;
  uint32_t num_edits_ = 0;
  std::vector<ScannedValue> values_;
  std::map<std::string, ScannedValue> saves_;
};

std::ostream& operator<<(std::ostream& os, const ScanResult& result);

}  // namespace nnsight
