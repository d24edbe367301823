// EnvSwitch: a process-wide on/off switch for a device path, read from the
// environment on first use (NAME=0: off; unset or anything else: on), then
// set by scopes that tests and benches open (UseCudaKernels,
// UseFlashAttention) to compare the path with what it replaces.
#pragma once

#include <atomic>

namespace nnsight::kernels {

class EnvSwitch {
 public:
  explicit constexpr EnvSwitch(const char* env) : env_(env) {}
  bool on();
  // Sets the switch; returns its previous state for restore().
  int set(bool on);
  void restore(int before) { state_.store(before); }

 private:
  const char* env_;
  std::atomic<int> state_{-1};  // -1: not read yet; 0 off; 1 on
};

}  // namespace nnsight::kernels
