#include "support/hand_started_workers.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include <nnsight/engine_args.hpp>

#include "runner/executor/mp_executor.h"

extern char** environ;

namespace nnsight::testing {

HandStartedWorkers::HandStartedWorkers(int n, int threads) {
  try {
    start(n, threads);
  } catch (...) {
    stop_all();
    throw;
  }
}

void HandStartedWorkers::start(int n, int threads) {
  const std::string program = runner::find_worker_program(EngineArgs());
  const std::string threads_s = std::to_string(threads);
  for (int i = 0; i < n; ++i) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<char*> argv = {const_cast<char*>(program.c_str()),   const_cast<char*>("--listen"),
                               const_cast<char*>("127.0.0.1:0"),     const_cast<char*>("--threads"),
                               const_cast<char*>(threads_s.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, program.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      throw std::runtime_error("cannot start " + program);
    }
    pids_.push_back(pid);
    // "nnsight-worker listening on 127.0.0.1:PORT\n"
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[128];
      const ssize_t got = ::read(out[0], buf, sizeof buf);
      if (got <= 0) break;
      line.append(buf, static_cast<size_t>(got));
    }
    out_fds_.push_back(out[0]);  // kept open: a later write to stdout must not raise SIGPIPE
    const std::string tag = "listening on ";
    const auto at = line.find(tag), nl = line.find('\n');
    if (at == std::string::npos || nl == std::string::npos)
      throw std::runtime_error("worker " + std::to_string(i) + " did not report its address: '" + line + "'");
    addresses_ += (addresses_.empty() ? "" : ",") + line.substr(at + tag.size(), nl - at - tag.size());
  }
}

int HandStartedWorkers::wait_exit(size_t i, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pids_.at(i), &status, WNOHANG) == pids_[i]) {
      pids_[i] = -1;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

HandStartedWorkers::~HandStartedWorkers() { stop_all(); }

void HandStartedWorkers::stop_all() {
  for (pid_t& p : pids_) {
    if (p <= 0) continue;
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
    p = -1;
  }
  for (int fd : out_fds_) ::close(fd);
  out_fds_.clear();
}

}  // namespace nnsight::testing
