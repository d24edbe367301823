#include "runner/executor.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include "runner/inproc_executor.h"
#include "runner/mp_executor.h"
#include "runner/worker_setup.h"

namespace nnsight::runner {

std::unique_ptr<Executor> make_executor(const EngineArgs& engine_args) {
  engine_args.validate();
  // Every worker must name shared resources (capture segments) alike: the
  // default engine id is this, the engine's, process id.
  EngineArgs args = engine_args;
  if (args.engine_id().empty()) args.engine_id(std::to_string(::getpid()));
  if (args.executor() == "mp" || args.tensor_parallel_size() > 1) return std::make_unique<MultiProcExecutor>(args);
  if (args.num_threads() > 0) at::set_num_threads(static_cast<int>(args.num_threads()));
  return std::make_unique<InProcExecutor>(build_model_runner(args, tp::ParallelContext{}));
}

}  // namespace nnsight::runner
