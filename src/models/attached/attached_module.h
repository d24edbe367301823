// AttachedModule: a module loaded from a file of its own (a sparse
// autoencoder, a transcoder, a linear probe, a steering vector) and attached
// to the served model under a path of its own, next to `model` and `lm_head`.
// It runs on the output of its hook point (a module of the model) -- but only
// while something splices it there: a trace that touches one of its paths,
// or the structure probe. A step no trace of which touches it runs nothing.
//
// Traces call it like a model module (`lm.envoy("sae_l3")(h)`) and read or
// write its own points (`sae_l3.hook_sae_acts_post`) per request; see
// docs/attached-modules.md.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/module.h"

namespace nnsight {

class CausalLM;

class AttachedModule : public Module {
 public:
  // source: the file it came from, named in messages.
  AttachedModule(std::string type_name, std::string source, int64_t d_in);

  const std::string& source() const { return source_; }
  // Width of the hook point's output it reads (the last dimension).
  int64_t d_in() const { return d_in_; }
  // The model's module whose output it runs on (set by attach_module).
  Module* host() const { return host_; }
  const std::string& host_path() const { return host_path_; }

  // Runs on the host's output x ([rows, d_in], the step's flat batch) with
  // the hooks of its own points; returns what the model continues with
  // instead of x, or nullopt to keep x (bitwise). Rows no hook changed keep
  // x's bits even when others' rows change.
  virtual std::optional<at::Tensor> run_at_host(const at::Tensor& x) = 0;

  // Registers a forward hook on the host that runs run_at_host. Throws
  // ConfigError when the host's output is not d_in wide (the first forward
  // that reaches it, i.e. the structure probe at start-up).
  HookHandle splice();

  // Moves the module's tensors to the model's device and dtype.
  virtual void to_options(const at::TensorOptions& options) = 0;

 protected:
  // "attached module 'sae_l3' (/path/sae_weights.safetensors)": the head of messages.
  std::string what() const;

 private:
  friend void attach_module(CausalLM& model, const std::string& name, std::shared_ptr<AttachedModule> module,
                            const std::string& hook_point);
  std::string source_;
  int64_t d_in_;
  Module* host_ = nullptr;
  std::string host_path_;
};

// Registers `module` as the model's child `name` (its path), running on the
// output of the module at `hook_point`. Throws ConfigError for a name that is
// not a plain identifier or is taken, an unknown hook point (with the closest
// path), or a hook point whose output is split across tensor-parallel ranks.
void attach_module(CausalLM& model, const std::string& name, std::shared_ptr<AttachedModule> module,
                   const std::string& hook_point);

// The modules attached to `model`, in the order they were attached.
std::vector<AttachedModule*> attached_modules(CausalLM& model);

}  // namespace nnsight
