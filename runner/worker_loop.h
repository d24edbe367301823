// The worker process's main loop: receive WorkerInit, build the model
// runner, then run every step the engine sends until shutdown or until the
// engine's end of the socket closes.
#pragma once

namespace nnsight::runner {

// Returns the process exit status.
int run_worker(int fd, int rank);

}  // namespace nnsight::runner
