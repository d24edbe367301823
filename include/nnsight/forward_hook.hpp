// Forward hooks configured as data (EngineArgs::forward_hooks, the CLI's
// --forward-hooks; see docs/hooks.md): what a hook factory sees.
//
// A spec names a factory ("module:factory"); the factory takes the spec's
// JSON "config" and returns a hook; the engine attaches that hook to every
// module whose path matches the spec's patterns, in every worker, and calls
// it after each forward of those modules.
//
// A plugin (a shared library linked against nnsight) registers its factories
// with one line per factory:
//
//   nnsight::ForwardHookFn make_scaler(const nlohmann::json& config);
//   NNSIGHT_HOOK_FACTORY("my_plugin", make_scaler, make_scaler)
//
// which makes "my_plugin:make_scaler" resolvable once the library is loaded,
// and lets "libmy_plugin.so:make_scaler" (or a path) load it.
#pragma once

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace nnsight {

// A module's positional inputs (always a tuple) or its output: one tensor, or
// a tuple whose element 0 is the tensor the module computed (undefined
// tensors stand for Python's None), as Hugging Face modules return them.
class HookValue {
 public:
  HookValue() = default;
  /*implicit*/ HookValue(at::Tensor t) : items_{std::move(t)} {}
  static HookValue tuple(std::vector<at::Tensor> items) {
    HookValue v;
    v.items_ = std::move(items);
    v.tuple_ = true;
    return v;
  }

  bool is_tuple() const { return tuple_; }
  size_t size() const { return items_.size(); }
  // Element i; throws std::out_of_range for a bad index.
  const at::Tensor& at(size_t i) const {
    if (i >= items_.size()) throw std::out_of_range("HookValue: index " + std::to_string(i) + " out of range");
    return items_[i];
  }
  // The tensor of a plain value, or element 0 of a tuple.
  const at::Tensor& tensor() const { return at(0); }
  const std::vector<at::Tensor>& items() const { return items_; }

 private:
  std::vector<at::Tensor> items_;
  bool tuple_ = false;
};

// The module a hook runs on.
struct HookedModule {
  std::string path;       // Hugging Face dotted path, "model.layers.3.mlp"
  std::string type_name;  // the class name users know from Python, "LlamaMLP"
  // Under tensor parallelism a hook runs on every rank and sees that rank's
  // values: "" when the output is whole on every rank (decoder layers,
  // attention and MLP blocks, norms, embeddings, the LM head), else how it
  // is split, e.g. "split on the last dimension over 3 ranks (512 of 1536
  // per rank)" for a column-parallel projection (docs/tensor_parallel.md).
  std::string output_sharding;
};

// Called after the module's forward. Returning a value replaces the output
// (same shape as element 0 of `output`; dtype and device are converted);
// std::nullopt keeps it. Throwing fails the step's requests with the message.
using ForwardHookFn = std::function<std::optional<HookValue>(const HookedModule& module, const HookValue& inputs,
                                                             const HookValue& output)>;

// Builds a hook from a spec's "config" (an empty object when the spec has
// none). Returning an empty function is Python's None: the spec is skipped
// with a warning.
using HookFactory = std::function<ForwardHookFn(const nlohmann::json& config)>;

// Makes `factory` resolvable as "<module>:<name>" (and "<module>.<name>").
// Registering the same pair again replaces the factory.
void register_hook_factory(const std::string& module, const std::string& name, HookFactory factory);

// ---- which rows of the flat batch belong to which request

// One request's part of the forward in progress. The engine concatenates
// the new tokens of every scheduled request into one flat batch, so a
// module's [num_tokens, ...] input and output hold rows of many requests.
struct BatchRequest {
  uint64_t request_id = 0;
  int64_t token_start = 0;      // first row it owns in the flat [num_tokens, ...] tensors
  int64_t num_tokens = 0;       // rows it owns: a prompt (or a chunk of it) in prefill, 1 in decode
  int64_t first_position = 0;   // position in its sequence of its first row
  int64_t generation_step = 0;  // output tokens before this forward: 0 = prefill, n = forward after n tokens
  bool samples = false;         // its last row produces the next token in this step
  bool recompute = false;       // re-prefill of a preempted request

  int64_t last_row() const { return token_start + num_tokens - 1; }
};

// The flat batch of the forward in progress. A view: valid only inside the
// hook call that obtained it.
class ForwardBatch {
 public:
  uint64_t engine_step() const;  // the engine's step counter
  int64_t num_tokens() const;    // rows of the flat batch
  size_t num_requests() const;
  BatchRequest request(size_t i) const;  // in flat-batch order; throws std::out_of_range
  std::optional<BatchRequest> find(uint64_t request_id) const;
  std::optional<BatchRequest> request_of_row(int64_t row) const;  // the request owning flat row `row`
  // The rows of `t` ([num_tokens, ...]) that `r` owns: a view.
  at::Tensor rows_of(const BatchRequest& r, const at::Tensor& t) const;

 private:
  explicit ForwardBatch(const void* step) : step_(step) {}
  friend std::optional<ForwardBatch> current_forward_batch();
  const void* step_;
};

// The batch being computed on this thread, or std::nullopt outside an engine
// forward (for example when a test calls a module directly).
std::optional<ForwardBatch> current_forward_batch();

namespace detail {
struct HookFactoryRegistrar {
  HookFactoryRegistrar(const char* module, const char* name, HookFactory factory) {
    register_hook_factory(module, name, std::move(factory));
  }
};
}  // namespace detail

}  // namespace nnsight

// Registers `fn` (callable as ForwardHookFn(const nlohmann::json&)) as
// "<module>:<name>" when the library is loaded, and exports it as the C
// symbol nnsight_hook_factory_<name>, through which a library named by path
// ("libfoo.so:<name>") is searched. `module` is a string literal ("steering"
// or "my.plugin"); `name` an identifier.
#define NNSIGHT_HOOK_FACTORY(module, name, fn)                                                                        \
  extern "C" __attribute__((visibility("default"))) void nnsight_hook_factory_##name(const nlohmann::json* config,    \
                                                                                     ::nnsight::ForwardHookFn* out) { \
    *out = ::nnsight::ForwardHookFn((fn)(*config));                                                                   \
  }                                                                                                                   \
  static const ::nnsight::detail::HookFactoryRegistrar nnsight_hook_factory_registrar_##name(                         \
      module, #name, [](const nlohmann::json& config) { return ::nnsight::ForwardHookFn((fn)(config)); });
