#include "runner/model_runner/current_step.h"

namespace nnsight::runner {

namespace {
thread_local const StepContext* g_current = nullptr;
}

const StepContext* current_step() { return g_current; }

ScopedCurrentStep::ScopedCurrentStep(const StepContext* ctx) : previous_(g_current) { g_current = ctx; }
ScopedCurrentStep::~ScopedCurrentStep() { g_current = previous_; }

}  // namespace nnsight::runner
