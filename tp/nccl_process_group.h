// The NCCL backend: NCCL called directly (ncclCommInitRank, ncclAllReduce,
// ncclAllGather, ncclBroadcast) on CUDA tensors, the unique id exchanged
// through the rendezvous store. Built when the CUDA toolkit and nccl.h are
// found (NNSIGHT_HAVE_NCCL); libnccl and the CUDA runtime are opened at run
// time, so the library itself does not depend on them (a CUDA LibTorch has
// already loaded both). Collectives run on LibTorch's current CUDA stream.
#pragma once

#include <memory>

#include "tp/process_group.h"
#include "tp/store.h"

namespace nnsight::tp {

// True when this build has the NCCL backend compiled in.
bool nccl_compiled();

// Number of CUDA devices the CUDA runtime sees (0 without a GPU, a driver,
// or the runtime library). Never throws.
int cuda_device_count();

// Joins the group on CUDA device `device` through `store` (unused, and may
// be null, for a world of 1). Throws
// nnsight::Error when NCCL or the CUDA runtime cannot be loaded, or the
// communicator cannot be set up.
std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<Store>& store, int rank, int world_size,
                                                      int device);

}  // namespace nnsight::tp
