// Worker processes started the way a user starts them on other machines:
// `nnsight-worker --listen 127.0.0.1:0`, each printing the port it got. The
// engine then connects to them (EngineArgs.worker_addresses).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace nnsight::testing {

class HandStartedWorkers {
 public:
  // Starts n workers (threads: the --threads each gets). Throws when one
  // does not report its port within a few seconds.
  explicit HandStartedWorkers(int n, int threads = 1);
  ~HandStartedWorkers();  // kills the ones still running
  HandStartedWorkers(const HandStartedWorkers&) = delete;
  HandStartedWorkers& operator=(const HandStartedWorkers&) = delete;

  // "127.0.0.1:p0,127.0.0.1:p1,..." in rank order.
  const std::string& addresses() const { return addresses_; }
  const std::vector<pid_t>& pids() const { return pids_; }
  // Waits for worker i to exit and returns its wait status (-1 if it does not within timeout_s).
  int wait_exit(size_t i, double timeout_s);

 private:
  void start(int n, int threads);
  void stop_all();
  std::vector<pid_t> pids_;
  std::vector<int> out_fds_;
  std::string addresses_;
};

}  // namespace nnsight::testing
