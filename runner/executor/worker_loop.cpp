#include "runner/executor/worker_loop.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <cstdio>
#include <exception>

#include "core/model_path.h"
#include "core/weight_source.h"
#include "runner/executor/wire.h"
#include "runner/executor/worker_error.h"
#include "runner/executor/worker_setup.h"

namespace nnsight::runner {

int run_worker(int fd, int64_t threads_override) {
  MessageType type;
  std::string payload;
  std::unique_ptr<ModelRunner> runner;
  int rank = 0;
  try {
    if (!recv_message(fd, -1, type, payload) || type != MessageType::kInit) return 2;
    WorkerInit init;
    decode(payload, init);
    rank = init.rank;
    const int64_t threads = threads_override > 0 ? threads_override : init.num_threads;
    if (threads > 0) at::set_num_threads(static_cast<int>(threads));
    c10::InferenceMode guard;
    EngineArgs args = init.args;
    // A size that does not divide the model fails here, before any rank
    // waits for the others.
    check_tensor_parallel(open_weights(resolve_model_path(args.model()))->config(), init.world_size);
    tp::ParallelContext ctx = join_tensor_parallel_group(args, init.rank, init.world_size, init.rendezvous);
    runner = build_model_runner(args, ctx);
    WorkerReady ready{runner->config().num_blocks, runner->model().config(), runner->structure()};
    if (!send_message(fd, MessageType::kReady, encode(ready))) return 3;
  } catch (const WorkerError&) {
    return 3;  // the engine went away
  } catch (const std::exception& e) {
    send_message(fd, MessageType::kError, e.what());
    return 1;
  }

  c10::InferenceMode guard;
  while (true) {
    try {
      if (!recv_message(fd, -1, type, payload)) continue;
    } catch (const WorkerError&) {
      return 0;  // engine closed the connection: nothing left to serve
    }
    if (type == MessageType::kShutdown) return 0;
    if (type != MessageType::kStep) {
      send_message(fd, MessageType::kError, "unexpected message type " + std::to_string(static_cast<uint32_t>(type)));
      return 1;
    }
    try {
      SchedulerOutput step;
      decode(payload, step);
      ModelRunnerOutput out = runner->execute(step);
      if (!send_message(fd, MessageType::kStepDone, rank == 0 ? encode(out) : std::string())) return 3;
    } catch (const std::exception& e) {
      // A broken collective (tp::CollectiveError) or a corrupt step: this
      // rank cannot go on in step with the others.
      send_message(fd, MessageType::kError, e.what());
      return 1;
    }
  }
}

}  // namespace nnsight::runner
