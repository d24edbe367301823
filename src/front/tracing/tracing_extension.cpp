// Attaches an Interleaver to every model runner (in this process and in each
// worker process), so requests carrying a trace payload run their mediators.
#include <memory>

#include "front/tracing/interleaver.h"
#include "front/tracing/worker_functions.h"
#include "runner/model_runner.h"
#include "runner/runner_extension.h"

namespace nnsight::tracing {
namespace {

const bool registered = [] {
  runner::register_runner_extension("tracing", [](runner::RunnerExtensionContext& ctx) {
    ctx.runner.add_observer(std::make_shared<Interleaver>(ctx.runner, dsl::Limits(), &worker_functions()));
  });
  return true;
}();

}  // namespace
}  // namespace nnsight::tracing
