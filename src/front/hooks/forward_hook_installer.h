// Attaching forward_hooks specs to a model, with SGLang's semantics (the
// same checks, order and messages; docs/hooks.md):
//   - a spec without target_modules or hook_factory: warning, skipped;
//   - the factory path is resolved (errors are thrown: start-up fails);
//   - the factory returns no hook: warning, skipped;
//   - no module path matches any pattern: warning, start-up continues;
//   - each attachment logs "Registered forward hook '<name>' on <path>".
// Patterns are matched with fnmatch against every Module path, the root ("")
// included, in module order. One hook object serves all modules of a spec.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "core/module.h"

namespace nnsight::hooks {

// The hooks a spec list attached; removes them when destroyed (the model
// may outlive the engine that attached them, and other engines may share it).
class InstalledHooks {
 public:
  InstalledHooks() = default;
  ~InstalledHooks() { remove_all(); }
  InstalledHooks(InstalledHooks&&) = default;
  InstalledHooks& operator=(InstalledHooks&& other) {
    remove_all();
    handles_ = std::move(other.handles_);
    return *this;
  }
  InstalledHooks(const InstalledHooks&) = delete;
  InstalledHooks& operator=(const InstalledHooks&) = delete;

  size_t size() const { return handles_.size(); }
  void add(HookHandle h) { handles_.push_back(std::move(h)); }
  void remove_all() {
    for (auto& h : handles_) h.remove();
    handles_.clear();
  }

 private:
  std::vector<HookHandle> handles_;
};

// `specs` is a JSON list (hooks::load_hook_specs). Throws ConfigError for a
// malformed spec or an unresolvable factory; hooks attached before the error
// are removed again.
InstalledHooks install_forward_hooks(Module& root, const nlohmann::json& specs);

}  // namespace nnsight::hooks
