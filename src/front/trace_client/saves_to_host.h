// A finished trace's saves on their way to the host. Made on the engine's
// loop thread, it only enqueues the copies of saves that sit on a GPU
// (core/host_copies.h: a side stream, pinned memory); land(), on another
// thread (the result thread, the server's completion thread), waits for them
// and puts the host tensors in place. Neither the loop nor the next steps'
// kernels wait for a large save to cross the bus.
#pragma once

#include <nnsight/request_output.hpp>

#include <vector>

#include "core/host_copies.h"

namespace nnsight::tracing {

class SavesToHost {
 public:
  // Starts the copies of `outputs`' saves that are on a device.
  explicit SavesToHost(std::vector<RequestOutput>& outputs);
  // Whether any save was on a device (else land() has nothing to do).
  bool any() const { return any_; }
  // Waits for the copies and replaces `outputs`' device saves (the same
  // outputs, in the same order) with them. A failed copy (a GPU fault)
  // becomes each output's error, not an exception, and returns false.
  bool land(std::vector<RequestOutput>& outputs);

 private:
  bool any_ = false;
  HostCopies copies_;
};

}  // namespace nnsight::tracing
