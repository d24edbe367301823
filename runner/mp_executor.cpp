#include "runner/mp_executor.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <nnsight/error.hpp>

#include "runner/worker_error.h"

extern char** environ;

namespace nnsight::runner {

namespace {
bool executable(const std::string& p) { return ::access(p.c_str(), X_OK) == 0; }

std::string library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&find_worker_program), &info) == 0 || !info.dli_fname) return "";
  std::string p = info.dli_fname;
  auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// Worker start-up loads the model: allow far longer than a step.
constexpr double kStartupTimeoutS = 900.0;
}  // namespace

std::string find_worker_program(const EngineArgs& args) {
  if (!args.worker_program().empty()) {
    if (!executable(args.worker_program()))
      throw ConfigError("EngineArgs.worker_program '" + args.worker_program() + "' is not an executable file");
    return args.worker_program();
  }
  if (const char* env = std::getenv("NNSIGHT_WORKER"); env && *env && executable(env)) return env;
  const std::string dir = library_dir();
  for (const std::string& cand : {dir + "/nnsight-worker", dir + "/../bin/nnsight-worker",
                                  dir + "/../libexec/nnsight/nnsight-worker"})
    if (executable(cand)) return cand;
  throw ConfigError("cannot find the nnsight-worker program (looked next to " + dir +
                    "); set EngineArgs.worker_program or NNSIGHT_WORKER");
}

MultiProcExecutor::MultiProcExecutor(const EngineArgs& args) : args_(args) {
  const std::string program = find_worker_program(args_);
  const int world = static_cast<int>(args_.tensor_parallel_size());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = args_.num_threads() > 0 ? args_.num_threads() : std::max<int64_t>(1, cores / world);
  if (world > 1) {
    char tmpl[] = "/tmp/nnsight-rdzv-XXXXXX";
    if (!::mkdtemp(tmpl)) throw Error(std::string("cannot create a rendezvous directory: ") + std::strerror(errno));
    rendezvous_dir_ = tmpl;
  }
  for (int rank = 0; rank < world; ++rank) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      kill_all();
      throw Error(std::string("socketpair failed: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);  // the worker talks on fd 3 (dup2 clears CLOEXEC)
    std::string rank_s = std::to_string(rank);
    std::vector<char*> argv = {const_cast<char*>(program.c_str()), const_cast<char*>("--fd"), const_cast<char*>("3"),
                               const_cast<char*>("--rank"), rank_s.data(), nullptr};
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, program.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    if (rc != 0) {
      ::close(sv[0]);
      kill_all();
      throw Error("cannot start worker " + program + ": " + std::strerror(rc));
    }
    workers_.push_back(Worker{pid, sv[0], rank});
  }
  for (auto& w : workers_) {
    WorkerInit init{args_, w.rank, world, rendezvous_dir_, threads};
    if (!send_message(w.fd, MessageType::kInit, encode(init))) fail(w, "did not accept its start-up message");
  }
  for (auto& w : workers_) {
    MessageType type;
    std::string payload;
    try {
      if (!recv_message(w.fd, kStartupTimeoutS, type, payload)) fail(w, "did not finish starting within the timeout");
    } catch (const WorkerError& e) {
      fail(w, std::string("failed to start (") + e.what() + ")");
    }
    if (type == MessageType::kError) {
      kill_all();
      throw Error("worker rank " + std::to_string(w.rank) + " failed to start: " + payload);
    }
    if (type != MessageType::kReady) fail(w, "sent an unexpected message at start-up");
    WorkerReady ready;
    decode(payload, ready);
    if (w.rank == 0) {
      num_kv_blocks_ = ready.num_kv_blocks;
      config_ = ready.config;
      structure_ = ready.structure;
    } else {
      num_kv_blocks_ = std::min(num_kv_blocks_, ready.num_kv_blocks);
    }
  }
}

MultiProcExecutor::~MultiProcExecutor() { shutdown(); }

std::vector<pid_t> MultiProcExecutor::worker_pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w.pid);
  return out;
}

std::string MultiProcExecutor::describe_exit(Worker& w) {
  if (w.pid <= 0) return "";
  int status = 0;
  // Give a dying process a moment to be reaped.
  for (int i = 0; i < 50; ++i) {
    pid_t r = ::waitpid(w.pid, &status, WNOHANG);
    if (r == w.pid) {
      w.pid = -1;
      if (WIFSIGNALED(status)) return " (killed by signal " + std::to_string(WTERMSIG(status)) + ")";
      if (WIFEXITED(status)) return " (exited with status " + std::to_string(WEXITSTATUS(status)) + ")";
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return " (still running)";
}

void MultiProcExecutor::fail(const Worker& w, const std::string& what) {
  Worker copy = w;
  std::string exit = describe_exit(copy);
  for (auto& x : workers_)
    if (x.rank == w.rank) x.pid = copy.pid;
  kill_all();
  dead_ = true;
  throw WorkerError("worker rank " + std::to_string(w.rank) + " " + what + exit);
}

void MultiProcExecutor::kill_all() {
  for (auto& w : workers_) {
    if (w.fd >= 0) ::close(w.fd);
    w.fd = -1;
    if (w.pid > 0) {
      ::kill(w.pid, SIGKILL);
      ::waitpid(w.pid, nullptr, 0);
      w.pid = -1;
    }
  }
  if (!rendezvous_dir_.empty()) {
    std::string cmd_dir = rendezvous_dir_;
    rendezvous_dir_.clear();
    // The rendezvous directory holds only the file store's files.
    if (auto* d = ::opendir(cmd_dir.c_str())) {
      while (auto* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") ::unlink((cmd_dir + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(cmd_dir.c_str());
  }
}

ModelRunnerOutput MultiProcExecutor::execute(const SchedulerOutput& step) {
  if (dead_) throw WorkerError("the workers are gone after an earlier failure");
  const std::string bytes = encode(step);
  for (auto& w : workers_)
    if (!send_message(w.fd, MessageType::kStep, bytes)) fail(w, "died (its connection is closed)");
  ModelRunnerOutput result;
  for (auto& w : workers_) {
    MessageType type;
    std::string payload;
    try {
      if (!recv_message(w.fd, args_.worker_timeout_s(), type, payload))
        fail(w, "did not finish step " + std::to_string(step.step) + " within " +
                    std::to_string(static_cast<int64_t>(args_.worker_timeout_s())) + " s (hung)");
    } catch (const WorkerError& e) {
      fail(w, std::string("died during step ") + std::to_string(step.step) + " (" + e.what() + ")");
    }
    if (type == MessageType::kError) fail(w, "failed: " + payload);
    if (type != MessageType::kStepDone) fail(w, "sent an unexpected message");
    if (w.rank == 0) decode(payload, result);
  }
  return result;
}

void MultiProcExecutor::shutdown() {
  for (auto& w : workers_)
    if (w.fd >= 0) send_message(w.fd, MessageType::kShutdown, "");
  // Let them exit on their own briefly, then make sure.
  for (auto& w : workers_) {
    for (int i = 0; i < 200 && w.pid > 0; ++i) {
      if (::waitpid(w.pid, nullptr, WNOHANG) == w.pid) w.pid = -1;
      else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  kill_all();
  workers_.clear();
}

}  // namespace nnsight::runner
