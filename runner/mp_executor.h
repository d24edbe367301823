// MultiProcExecutor: the model runs in N worker processes (one per
// tensor-parallel rank), started as fresh programs (nnsight-worker) so no
// LibTorch state crosses a fork. Every step goes to every worker as bytes
// over a local socket; rank 0's answer is the step's result. A worker that
// dies, hangs past the timeout, or breaks the protocol raises WorkerError,
// and the executor tears the others down: no caller waits forever.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runner/executor.h"
#include "runner/wire.h"

namespace nnsight::runner {

class MultiProcExecutor final : public Executor {
 public:
  explicit MultiProcExecutor(const EngineArgs& args);
  ~MultiProcExecutor() override;

  ModelRunnerOutput execute(const SchedulerOutput& step) override;
  int64_t num_kv_blocks() const override { return num_kv_blocks_; }
  const ModelConfig& model_config() const override { return config_; }
  const ModelStructure& model_structure() const override { return structure_; }
  void shutdown() override;

  // Worker process ids (tests kill them to check failure handling).
  std::vector<pid_t> worker_pids() const;

 private:
  struct Worker {
    pid_t pid = -1;
    int fd = -1;
    int rank = 0;
  };
  [[noreturn]] void fail(const Worker& w, const std::string& what);
  std::string describe_exit(Worker& w);
  void kill_all();

  EngineArgs args_;
  std::vector<Worker> workers_;
  int64_t num_kv_blocks_ = 0;
  ModelConfig config_;
  ModelStructure structure_;
  bool dead_ = false;
  std::string rendezvous_dir_;
};

// Where the nnsight-worker program is: args.worker_program(), $NNSIGHT_WORKER,
// next to the library, or ../bin / ../libexec/nnsight relative to it.
std::string find_worker_program(const EngineArgs& args);

}  // namespace nnsight::runner
