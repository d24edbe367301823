// The NCCL backend's entry points in a build without the CUDA toolkit or
// nccl.h (CMake picks this file or nccl_process_group.cpp).
#include <nnsight/error.hpp>

#include "tp/nccl_process_group.h"

namespace nnsight::tp {

bool nccl_compiled() { return false; }

int cuda_device_count() { return 0; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<Store>&, int, int, int) {
  throw ConfigError(
      "this build of nnsight has no NCCL backend (the CUDA toolkit or nccl.h was not found when it "
      "was configured)");
}

}  // namespace nnsight::tp
