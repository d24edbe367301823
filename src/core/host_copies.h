// Tensors' copies to the host that leave a GPU on a side stream, into pinned
// memory: start() only enqueues them (behind the work already queued on each
// tensor's device) and returns; wait() blocks until they have landed. A
// trace's saves use it: the engine's loop thread starts the copies, a result
// thread waits for them, so neither the loop nor the next steps' kernels (on
// the compute stream) wait for a large save to cross the bus.
//
// CPU tensors are handed back as they are. In a build without a CUDA
// LibTorch, and for other devices, wait() copies synchronously.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace nnsight {

class HostCopies {
 public:
  HostCopies() = default;
  // Undefined tensors stay undefined.
  static HostCopies start(std::vector<at::Tensor> tensors);
  // The host tensors, in start()'s order (each once: a second call throws).
  std::vector<at::Tensor> wait();
  // How many copies went to a side stream (0 without a GPU).
  size_t asynchronous() const { return asynchronous_; }

 private:
  std::vector<at::Tensor> sources_;          // the device memory, alive until the copies land
  std::vector<at::Tensor> hosts_;            // pinned host tensors (undefined: copy in wait())
  std::vector<std::shared_ptr<void>> done_;  // one CUDA event per device
  size_t asynchronous_ = 0;
  bool waited_ = false;
};

}  // namespace nnsight
