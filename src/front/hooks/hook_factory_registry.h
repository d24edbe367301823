// The factories registered under module names (built-ins, plugins loaded
// into the process, the NNSIGHT_HOOK_FACTORY macro). Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nnsight/forward_hook.hpp>

namespace nnsight::hooks {

bool hook_module_registered(const std::string& module);
std::optional<HookFactory> find_hook_factory(const std::string& module, const std::string& name);
// "module:name" of every registered factory, sorted (for messages and docs).
std::vector<std::string> registered_hook_factories();

}  // namespace nnsight::hooks
