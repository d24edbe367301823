#include "front/hooks/hook_factory_registry.h"

#include <map>
#include <mutex>
#include <utility>

namespace nnsight {

namespace hooks {
namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, std::map<std::string, HookFactory>> modules;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

bool hook_module_registered(const std::string& module) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.modules.count(module) > 0;
}

std::optional<HookFactory> find_hook_factory(const std::string& module, const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto m = r.modules.find(module);
  if (m == r.modules.end()) return std::nullopt;
  auto f = m->second.find(name);
  if (f == m->second.end()) return std::nullopt;
  return f->second;
}

std::vector<std::string> registered_hook_factories() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [module, factories] : r.modules)
    for (const auto& f : factories) out.push_back(module + ":" + f.first);
  return out;
}
}  // namespace hooks

void register_hook_factory(const std::string& module, const std::string& name, HookFactory factory) {
  hooks::Registry& r = hooks::registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.modules[module][name] = std::move(factory);
}

}  // namespace nnsight
