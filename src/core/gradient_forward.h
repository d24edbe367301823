// GradientForward: while one lives on this thread, the model's forward
// records an autograd graph, so a traced request can ask for gradients
// (`proxy.grad()` after `metric.backward()`, docs/gradients.md).
//
// The engine runs its steps under c10::InferenceMode, which records nothing;
// a step whose requests asked for gradients (the scheduler runs them apart
// from every other request) runs its forward, logits and graphs under this
// guard instead: inference mode off, grad mode on, and the flag that tells
// the input embedding to make its rows the leaf every gradient flows back to.
// The hand-written kernels see inputs that require grad and record
// themselves (core/kernels/kernel_gradients.h); with no guard alive nothing
// requires grad and they cost one branch.
#pragma once

#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

namespace nnsight {

class GradientForward {
 public:
  GradientForward();
  ~GradientForward();
  GradientForward(const GradientForward&) = delete;
  GradientForward& operator=(const GradientForward&) = delete;

  // Whether a guard is alive on this thread.
  static bool active();

 private:
  c10::InferenceMode inference_off_{false};
  at::AutoGradMode grad_on_{true};
  bool previous_;
};

}  // namespace nnsight
