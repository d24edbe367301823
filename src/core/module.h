// Module: the base of every model component. It gives each submodule its
// Hugging Face dotted path and PyTorch-style forward pre-hooks and forward hooks.
//
// Cost model: a module with no hook pays one predictable branch per call
// (`hooked_`); the hooked path builds ModuleIO values and runs the hooks.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/module_io.h"
#include "core/tensor_sharding.h"
#include "core/weight_source.h"

namespace nnsight {

class Module;
class HookTaps;

// Called before forward with the positional inputs (always a tuple). Returning
// a value replaces the inputs the module sees.
using ForwardPreHook = std::function<std::optional<ModuleIO>(Module& module, const ModuleIO& inputs)>;
// Called after forward with the inputs and the output. Returning a value
// replaces the output the caller receives (and the next hook sees).
using ForwardHook =
    std::function<std::optional<ModuleIO>(Module& module, const ModuleIO& inputs, const ModuleIO& output)>;

namespace detail {
struct HookRegistry;
}

// Removes its hook on remove() (idempotent). Outliving the module is safe.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<detail::HookRegistry> registry, uint64_t id) : registry_(std::move(registry)), id_(id) {}
  void remove();
  bool active() const;

 private:
  std::weak_ptr<detail::HookRegistry> registry_;
  uint64_t id_ = 0;
};

class Module : public torch::nn::Module {
 public:
  explicit Module(std::string type_name);
  ~Module() override;

  // Hugging Face dotted path ("model.layers.3.mlp"); "" for the root.
  const std::string& path() const { return path_; }
  // The class name users know from Python ("LlamaMLP").
  const std::string& type_name() const { return type_name_; }
  // Sets the path of this module and, recursively, of every Module below it,
  // from the names they were registered under.
  void assign_paths(const std::string& prefix = "");

  // Output shape of this module for hooks: a tensor, or a tuple of this many
  // elements (element 0 is the tensor the module computes; the rest are
  // undefined tensors, Python's None), as Hugging Face modules return.
  int output_tuple_size() const { return output_tuple_size_; }

  // How this module's input (element 0) and output (element 0) are held
  // across tensor-parallel ranks; nullptr: whole on every rank. Set by the
  // parallel layers (tp/) on themselves and on the modules between them.
  const TensorSharding* input_sharding() const { return input_sharding_.get(); }
  const TensorSharding* output_sharding() const { return output_sharding_.get(); }
  void set_input_sharding(std::shared_ptr<const TensorSharding> s) { input_sharding_ = std::move(s); }
  void set_output_sharding(std::shared_ptr<const TensorSharding> s) { output_sharding_ = std::move(s); }

  // A module that runs on a subset of the step's token rows (an MoE expert
  // and the modules inside it) says which token row each of its rows is:
  // int64 [rows], set for each forward by the module that routes them. Null
  // for every other module (its rows are the step's token or prompt rows).
  const at::Tensor* row_tokens() const { return row_tokens_.get(); }
  void set_row_tokens(std::shared_ptr<at::Tensor> t) { row_tokens_ = std::move(t); }

  // Whether an intervention graph may run this module on a tensor of its own
  // (a `call` node): modules whose forward takes one tensor (norms, linears,
  // MLPs, embeddings, the LM head). Attention and decoder layers need the
  // step's positions and KV cache: not callable.
  virtual bool callable() const { return false; }
  // Its forward on x (this rank's part of x under tensor parallelism). Only
  // for callable modules; run inside a CallScope so that no hook fires.
  virtual at::Tensor call(const at::Tensor& x);

  // While one lives on this thread, modules run without their hooks: a graph's
  // `call` must not trigger other traces' hooks, forward hooks or capture.
  class CallScope {
   public:
    CallScope();
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
  };

  // Called by a forward pre-hook: this call's output (element 0) is `output`
  // and the body does not run (a trace skipped the module for every row).
  void skip_body_with(at::Tensor output) { skip_output_ = std::move(output); }

  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  HookHandle register_forward_hook(ForwardHook hook);
  bool has_hooks() const noexcept { return hooked_; }
  // Hooks registered now (pre-hooks and forward hooks), and of each kind.
  size_t num_hooks() const;
  bool has_pre_hooks() const;
  bool has_forward_hooks() const;
  void clear_hooks();
  // Runs this module's hooks on values a forward computed earlier (recorded
  // by core/hook_taps.h while its hooks waited): its pre-hooks on `inputs`
  // when `output` is null, else its forward hooks on both. What they return
  // is not applied: only hooks that read are ever deferred.
  void run_deferred_hooks(const ModuleIO& inputs, const ModuleIO* output);

  // Loads this module's own parameters (not its children's) from `source`,
  // under its path. Modules without parameters keep the default no-op.
  virtual void load_weights(const WeightSource& source) {}
  // Calls load_weights on this module and every Module below it.
  void load_all_weights(const WeightSource& source);

  // Every Module under this one (itself included when include_self), keyed by path.
  std::vector<std::pair<std::string, Module*>> named_hookable_modules(bool include_self = true);

 protected:
  void set_output_tuple_size(int n) { output_tuple_size_ = n; }

  // Runs `body(x)` with this module's hooks around it. Every tensor-in,
  // tensor-out module forwards through here.
  template <class Body>
  at::Tensor invoke(const at::Tensor& x, Body&& body) {
    if (__builtin_expect(!hooked_, 1)) return body(x);
    return invoke_hooked(x, std::function<at::Tensor(const at::Tensor&)>(std::forward<Body>(body)));
  }

 private:
  friend struct detail::HookRegistry;
  friend class HookHandle;
  at::Tensor invoke_hooked(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& body);
  at::Tensor invoke_tapped(HookTaps& taps, const ModuleIO& inputs,
                           const std::function<at::Tensor(const at::Tensor&)>& body);
  // The output hooks see: y, or (y, None, ...) for a tuple-shaped module.
  ModuleIO as_output(const at::Tensor& y) const;
  void refresh_hooked();

  std::string type_name_;
  std::string path_;
  int output_tuple_size_ = 0;  // 0: plain tensor output
  bool hooked_ = false;
  std::shared_ptr<detail::HookRegistry> hooks_;
  std::shared_ptr<const TensorSharding> input_sharding_, output_sharding_;
  std::shared_ptr<at::Tensor> row_tokens_;
  at::Tensor skip_output_;  // set by a pre-hook for the current call only
};

}  // namespace nnsight
