// MultiProcExecutor: the model runs in N worker processes, one per
// tensor-parallel rank. By default the engine starts them as fresh programs
// (nnsight-worker) over local socket pairs, so no LibTorch state crosses a
// fork, and they rendezvous through a file store in a temporary directory.
// With EngineArgs.worker_addresses it connects instead to workers started by
// hand (nnsight-worker --listen host:port), possibly on other machines, which
// rendezvous through EngineArgs.tp_rendezvous (tcp://host:port).
//
// Every step goes to every worker; rank 0's answer is the step's result. A
// worker that dies, hangs past the timeout, or breaks the protocol raises
// WorkerError naming the rank at fault (a rank that died is blamed before
// the ranks that then failed their collectives), and the executor tears the
// others down: no caller waits forever.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runner/executor/executor.h"
#include "runner/executor/wire.h"

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
  // Kills what is left of the workers and starts them again as at
  // construction (spawned, or reconnected to the addresses given).
  bool restart(std::string* error) override;
  // Times the workers were started (1 after construction).
  int64_t starts() const { return starts_; }

  // Process ids of the workers this engine started, rank order (tests kill
  // them to check failure handling); -1 for a worker started by hand.
  std::vector<pid_t> worker_pids() const;
  // Where the ranks rendezvous (file:///... or tcp://host:port; "" at world size 1).
  const std::string& rendezvous() const { return rendezvous_; }

 private:
  struct Worker {
    pid_t pid = -1;  // -1: not started by this engine
    int fd = -1;
    int rank = 0;
    std::string where;  // "127.0.0.1:29600" for a worker started by hand
  };
  // Starts (or connects to) the workers and waits until they are ready.
  void start();
  void spawn_workers(int world, int64_t threads);
  void connect_workers(int world);
  // One reply of type `expected` from every worker (any order, up to
  // timeout_s). On a failure, returns after a short grace with the best
  // culprit's description in *failure; payloads by rank otherwise.
  std::vector<std::string> collect(MessageType expected, double timeout_s, const std::string& during,
                                   std::string* failure);
  std::string describe_exit(Worker& w);
  void kill_all();

  EngineArgs args_;
  std::vector<Worker> workers_;
  int64_t num_kv_blocks_ = 0;
  ModelConfig config_;
  ModelStructure structure_;
  bool dead_ = false;
  int64_t starts_ = 0;
  std::string rendezvous_;
  std::string rendezvous_dir_;  // the temporary directory of a file store we made
};

// Where the nnsight-worker program is: args.worker_program(), $NNSIGHT_WORKER,
// next to the library, or ../bin / ../libexec/nnsight relative to it.
std::string find_worker_program(const EngineArgs& args);

}  // namespace nnsight::runner
