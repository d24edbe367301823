// FunctionRegistry: functions a worker offers to graphs by name (Apply
// nodes). A graph cannot ship code; it can only name a function the server
// registered, with a checked number of arguments.
#pragma once

#include "dsl/value.h"

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nnsight::dsl {

using Function = std::function<Value(const std::vector<Value>& args)>;

struct FunctionDef {
  std::string name;
  size_t min_args = 0;
  size_t max_args = 0;
  Function fn;
};

class FunctionRegistry {
 public:
  // Registers `name` taking exactly `arity` arguments (replaces an earlier one).
  FunctionRegistry& add(std::string name, size_t arity, Function fn);
  // Registers `name` taking min_args..max_args arguments.
  FunctionRegistry& add(std::string name, size_t min_args, size_t max_args, Function fn);

  const FunctionDef* find(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  bool empty() const { return fns_.empty(); }

 private:
  std::map<std::string, FunctionDef, std::less<>> fns_;
};

}  // namespace nnsight::dsl
