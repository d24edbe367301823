#include "front/tracing/tracing_extension.h"

#include <memory>

#include "core/memory_budget.h"

#include "front/tracing/interleaver.h"
#include "front/tracing/worker_functions.h"
#include "runner/model_runner/model_runner.h"

namespace nnsight::tracing {

void attach_tracing(runner::RunnerExtensionContext& ctx) {
  InterleaverOptions options;
  options.limits = dsl::Limits();
  options.functions = &worker_functions();
  options.memory_budget_bytes = ctx.args.intervention_memory_mb() > 0 ? ctx.args.intervention_memory_mb() << 20
                                                                      : default_intervention_budget_bytes();
  ctx.runner.add_observer(std::make_shared<Interleaver>(ctx.runner, options));
}

}  // namespace nnsight::tracing
