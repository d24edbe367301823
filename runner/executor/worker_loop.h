// The worker process's main loop: receive WorkerInit, join the
// tensor-parallel group, build the model runner, then run every step the
// engine sends until shutdown or until the engine's end of the connection
// closes.
#pragma once

#include <cstdint>

namespace nnsight::runner {

// `fd`: a connected stream socket to the engine. threads_override > 0
// replaces the intra-op thread count the engine asks for. Returns the
// process exit status.
int run_worker(int fd, int64_t threads_override = 0);

}  // namespace nnsight::runner
