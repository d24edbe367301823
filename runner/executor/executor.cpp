#include "runner/executor/executor.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "runner/executor/inproc_executor.h"
#include "runner/executor/mp_executor.h"
#include "runner/executor/worker_setup.h"

namespace nnsight::runner {

std::unique_ptr<Executor> make_executor(const EngineArgs& engine_args) {
  engine_args.validate();
  // Every worker must name shared resources (capture segments) alike: the
  // default engine id is this, the engine's, process id.
  EngineArgs args = engine_args;
  if (args.engine_id().empty()) args.engine_id(std::to_string(::getpid()));
  if (args.executor() == "mp" || args.tensor_parallel_size() > 1 || !args.worker_addresses().empty())
    return std::make_unique<MultiProcExecutor>(args);
  // LibTorch's default intra-op thread count is not always the core count
  // (Debian's build starts at 1): "0 = all cores" is applied here.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(args.num_threads() > 0 ? args.num_threads() : cores));
  return std::make_unique<InProcExecutor>(build_model_runner(args, tp::ParallelContext{}));
}

}  // namespace nnsight::runner
