// Which path a tensor takes through this folder's kernels: the hand-written
// CPU kernels, or the device path (ATen calls a GPU runs as kernels, batched
// over the sequences). The device path runs on the CPU too, behind a switch,
// so the tests can check it (and count its ATen calls per step) without a GPU.
#pragma once

#include <ATen/core/Tensor.h>

namespace nnsight::kernels {

// True for a CPU tensor unless the device path is forced.
bool cpu_kernels_for(const at::Tensor& t);

bool device_path_forced();

// Forces the device path on CPU tensors for its lifetime (process-wide; for
// tests and benches, not for concurrent engines).
class ForceDevicePath {
 public:
  ForceDevicePath();
  ~ForceDevicePath();
  ForceDevicePath(const ForceDevicePath&) = delete;
  ForceDevicePath& operator=(const ForceDevicePath&) = delete;

 private:
  bool before_;
};

}  // namespace nnsight::kernels
