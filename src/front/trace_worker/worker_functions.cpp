#include "front/trace_worker/worker_functions.h"

namespace nnsight::tracing {

dsl::FunctionRegistry& worker_functions() {
  static dsl::FunctionRegistry registry;
  return registry;
}

}  // namespace nnsight::tracing
