// The step the model runner is computing on this thread, so a module hook
// can ask which rows of the flat batch belong to which request (and at which
// generation step) during the forward in progress. Null outside a step.
#pragma once

#include "runner/model_runner/step_observer.h"

namespace nnsight::runner {

const StepContext* current_step();

// Sets current_step() for its lifetime (restoring the previous value).
class ScopedCurrentStep {
 public:
  explicit ScopedCurrentStep(const StepContext* ctx);
  ~ScopedCurrentStep();
  ScopedCurrentStep(const ScopedCurrentStep&) = delete;
  ScopedCurrentStep& operator=(const ScopedCurrentStep&) = delete;

 private:
  const StepContext* previous_;
};

}  // namespace nnsight::runner
