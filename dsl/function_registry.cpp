#include "dsl/function_registry.h"

#include <nnsight/error.hpp>

namespace nnsight::dsl {

FunctionRegistry& FunctionRegistry::add(std::string name, size_t arity, Function fn) {
  return add(std::move(name), arity, arity, std::move(fn));
}

FunctionRegistry& FunctionRegistry::add(std::string name, size_t min_args, size_t max_args, Function fn) {
  if (name.empty()) throw ConfigError("FunctionRegistry: empty function name");
  if (min_args > max_args) throw ConfigError("FunctionRegistry: '" + name + "' has min_args > max_args");
  if (!fn) throw ConfigError("FunctionRegistry: '" + name + "' has no function");
  FunctionDef def{name, min_args, max_args, std::move(fn)};
  fns_[std::move(name)] = std::move(def);
  return *this;
}

const FunctionDef* FunctionRegistry::find(std::string_view name) const {
  auto it = fns_.find(name);
  return it == fns_.end() ? nullptr : &it->second;
}

std::vector<std::string> FunctionRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& kv : fns_) out.push_back(kv.first);
  return out;
}

}  // namespace nnsight::dsl
