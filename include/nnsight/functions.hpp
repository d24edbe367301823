// User functions: C++ code an intervention graph may call by name (an `apply`
// node: nnsight::apply("name", {args})), registered in the process that runs
// the model. A graph cannot ship code; it can only name a function that
// process registered.
//
//   nnsight::register_function("my.clip", 2, [](const std::vector<at::Tensor>& a) {
//     return a[0].clamp(-a[1].item<double>(), a[1].item<double>());
//   });
//
// Where to register:
//   - in process (the default executor): call register_function before the
//     LanguageModel / LLM is created; the engine lists the names it knows at
//     start-up, and traces naming anything else are refused before they run;
//   - worker processes (executor "mp", tensor parallelism, workers started by
//     hand): put the registrations in a shared library's static initializer
//     (NNSIGHT_FUNCTION below) and name the library in
//     EngineArgs().function_plugins("/path/libmine.so") (--function-plugins);
//     every worker loads it before it reports ready.
// Signature and threading: arguments arrive as tensors (numbers as 0-d
// tensors) on the model's device, whole (under tensor parallelism every rank
// calls the function with the same values); the result must be a tensor.
// Functions run on the engine's worker thread, one call at a time per
// process, inside the calling trace's memory budget; an exception fails only
// that trace, with the message. Keep them free of shared mutable state, or
// guard it: several processes and engines may call them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace nnsight {

using UserFunction = std::function<at::Tensor(const std::vector<at::Tensor>& args)>;

// Registers (or replaces) `name` taking exactly `num_args` arguments.
void register_function(const std::string& name, size_t num_args, UserFunction fn);
// The names registered in this process, sorted.
std::vector<std::string> registered_functions();

namespace detail {
struct FunctionRegistration {
  FunctionRegistration(const char* name, size_t num_args, UserFunction fn) {
    register_function(name, num_args, std::move(fn));
  }
};
}  // namespace detail

}  // namespace nnsight

// Registers a function when the library holding this line loads.
#define NNSIGHT_FUNCTION_CONCAT2(a, b) a##b
#define NNSIGHT_FUNCTION_CONCAT(a, b) NNSIGHT_FUNCTION_CONCAT2(a, b)
#define NNSIGHT_FUNCTION(name, num_args, fn)                                                                 \
  static const ::nnsight::detail::FunctionRegistration NNSIGHT_FUNCTION_CONCAT(nnsight_function_, __LINE__)( \
      name, num_args, fn);
