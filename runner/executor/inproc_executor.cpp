#include "runner/executor/inproc_executor.h"

#include <c10/core/InferenceMode.h>

namespace nnsight::runner {

InProcExecutor::InProcExecutor(std::unique_ptr<ModelRunner> runner) : runner_(std::move(runner)) {}

ModelRunnerOutput InProcExecutor::execute(const SchedulerOutput& step) {
  // InferenceMode is per thread: the engine loop may run on any thread.
  c10::InferenceMode guard;
  return runner_->execute(step);
}

}  // namespace nnsight::runner
