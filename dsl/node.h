// Node: one SSA instruction of an intervention graph. Nodes are stored in
// program order; a node's id is its index, and its inputs are ids of earlier
// nodes. Control flow is structured: an Iter or Cond node opens a block that a
// matching End node closes (Cond may have one Else in between). See docs/ir.md.
#pragma once

#include "core/provider_key.h"
#include "dsl/value.h"

#include <nnsight/source_location.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nnsight::dsl {

using NodeId = uint32_t;

// The order is the binary wire code: append only.
enum class NodeKind : uint8_t {
  Const = 0,      // value
  Get = 1,        // key @ step -> value the provider holds
  Set = 2,        // key @ step := args[0]
  Op = 3,         // name(args...) from the op registry
  Save = 4,       // save args[0] under name
  Iter = 5,       // opens a block run once per generation step in range; value = the step
  Cond = 6,       // opens a block run when args[0] is true
  Else = 7,       // splits a Cond block
  End = 8,        // closes the innermost Iter or Cond block
  Stop = 9,       // ends the request early
  External = 10,  // the value of node ext_node of invoke ext_invoke of the same trace
  Apply = 11,     // name(args...) from the worker's FunctionRegistry
  Call = 12,      // the model's module `name` run on args[0] with the worker's weights
  Grad = 13,      // the gradient of args[0] (a module value read by a Get) from the latest Backward
  Backward = 14,  // backpropagates args[0] (a one-element tensor) to the values Grad nodes name
};
constexpr int kNumNodeKinds = 15;
const char* node_kind_name(NodeKind k);  // "const", "get", ...

// Which generation step a Get/Set addresses.
struct StepSpec {
  enum class Mode : uint8_t {
    Fixed = 0,  // the step `value` (0 = the prefill step)
    Iter = 1,   // the current step of the innermost enclosing Iter, plus `value` (>= 0)
  };
  Mode mode = Mode::Fixed;
  int64_t value = 0;

  static StepSpec fixed(int64_t step) { return {Mode::Fixed, step}; }
  static StepSpec iter(int64_t offset = 0) { return {Mode::Iter, offset}; }
  bool operator==(const StepSpec& o) const { return mode == o.mode && value == o.value; }
  bool operator!=(const StepSpec& o) const { return !(*this == o); }
  std::string str() const;  // "3" or "iter+1"
};

// The steps an Iter node runs its body for: start, start+stride, ... < stop,
// or, with `all`, every step from start until the request finishes.
struct IterRange {
  int64_t start = 0;
  int64_t stop = 0;    // exclusive; ignored when all
  int64_t stride = 1;  // >= 1
  bool all = false;

  static IterRange range(int64_t start, int64_t stop, int64_t stride = 1) { return {start, stop, stride, false}; }
  static IterRange all_from(int64_t start = 0, int64_t stride = 1) { return {start, 0, stride, true}; }
  bool operator==(const IterRange& o) const {
    return start == o.start && stride == o.stride && all == o.all && (all || stop == o.stop);
  }
  bool operator!=(const IterRange& o) const { return !(*this == o); }
};

enum class SaveMode : uint8_t {
  Replace = 0,  // each run of the node overwrites the saved value
  Append = 1,   // each run appends; the saved value is the list of them
};

// A plain struct with the fields every kind may use; which ones a kind uses is
// listed in docs/ir.md and enforced by the codecs and the validator.
struct Node {
  NodeKind kind = NodeKind::Const;
  SourceLoc loc;     // the user's file and line
  std::string name;  // Get/Set: provider key as written; Op: op; Apply: function; Save: save name; Call: module path
  // Get/Set: `name` parsed, once, where the node is made (the builder, the
  // decoders; the validator for nodes made by hand); nullopt when `name` is
  // not a provider key (the validator rejects the node).
  std::optional<ProviderKey> key;
  std::vector<NodeId> args;                // Op/Apply: arguments; Set/Save/Cond/Call/Grad/Backward: exactly one
  Value value;                             // Const
  StepSpec step;                           // Get/Set
  IterRange range;                         // Iter
  SaveMode save_mode = SaveMode::Replace;  // Save
  uint32_t ext_invoke = 0;                 // External
  NodeId ext_node = 0;                     // External

  // Get/Set: sets `name` to `text` and `key` to its parse.
  void set_key(std::string text);
  // Whether this node produces a value other nodes may reference.
  bool has_value() const;
  // "node 7 (op 'softmax') at file.cpp:12": how every error names a node.
  std::string describe(NodeId id) const;
};

// Field-by-field equality over the fields the node's kind uses (values exact).
bool identical(const Node& a, const Node& b);

}  // namespace nnsight::dsl
