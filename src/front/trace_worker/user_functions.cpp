// register_function (include/nnsight/functions.hpp): public tensor functions
// wrapped into the worker's dsl::FunctionRegistry.
#include <nnsight/error.hpp>
#include <nnsight/functions.hpp>

#include <ATen/ATen.h>

#include "front/trace_worker/worker_functions.h"

namespace nnsight {

void register_function(const std::string& name, size_t num_args, UserFunction fn) {
  if (name.empty()) throw ConfigError("register_function: the name is empty");
  if (!fn) throw ConfigError("register_function: '" + name + "' has no function");
  tracing::worker_functions().add(name, num_args, [name, fn](const std::vector<dsl::Value>& args) {
    std::vector<at::Tensor> tensors;
    tensors.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const dsl::Value& v = args[i];
      if (v.is_tensor())
        tensors.push_back(v.as_tensor());
      else if (v.kind() == dsl::ValueKind::Int || v.kind() == dsl::ValueKind::Bool)
        tensors.push_back(at::scalar_tensor(v.as_int(), at::kLong));
      else if (v.is_number())
        tensors.push_back(at::scalar_tensor(v.as_double(), at::kDouble));
      else
        throw Error("function '" + name + "': argument " + std::to_string(i) + " is " + v.describe() +
                    " (a tensor or a number is needed)");
    }
    at::Tensor out = fn(tensors);
    if (!out.defined()) throw Error("function '" + name + "' returned no tensor");
    return dsl::Value(out);
  });
}

std::vector<std::string> registered_functions() { return tracing::worker_functions().names(); }

}  // namespace nnsight
