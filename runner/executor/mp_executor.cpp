#include "runner/executor/mp_executor.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>

#include <nnsight/error.hpp>

#include "core/model_path.h"
#include "core/weight_source.h"
#include "models/causal_lm.h"
#include "runner/executor/tcp_endpoint.h"
#include "runner/executor/worker_auth.h"
#include "runner/executor/worker_error.h"

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
// A worker started by hand may still be starting when the engine connects.
constexpr double kConnectTimeoutS = 60.0;
// After a first failure, how long to wait for the other ranks' news: a rank
// that died is a better culprit than the ranks whose collectives then broke.
constexpr double kFailureGraceS = 1.0;
// How long an authentication exchange may take (worker_auth.h).
constexpr double kAuthTimeoutS = 10.0;
// The TCP store's port when workers were started by hand and no rendezvous
// was named (torch.distributed's customary MASTER_PORT).
constexpr int kDefaultStorePort = 29500;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}
}  // namespace

std::string find_worker_program(const EngineArgs& args) {
  if (!args.worker_program().empty()) {
    if (!executable(args.worker_program()))
      throw ConfigError("EngineArgs.worker_program '" + args.worker_program() + "' is not an executable file");
    return args.worker_program();
  }
  if (const char* env = std::getenv("NNSIGHT_WORKER"); env && *env && executable(env)) return env;
  const std::string dir = library_dir();
  for (const std::string& cand :
       {dir + "/nnsight-worker", dir + "/../bin/nnsight-worker", dir + "/../libexec/nnsight/nnsight-worker"})
    if (executable(cand)) return cand;
  throw ConfigError("cannot find the nnsight-worker program (looked next to " + dir +
                    "); set EngineArgs.worker_program or NNSIGHT_WORKER");
}

MultiProcExecutor::MultiProcExecutor(const EngineArgs& args) : args_(args) {
  const int world = static_cast<int>(args_.tensor_parallel_size());
  // Workers this engine starts read this very file: refuse a size that does
  // not divide the model before starting any (workers started by hand, maybe
  // elsewhere, check their own copy).
  if (args_.worker_addresses().empty() && world > 1) {
    const std::string path = resolve_model_path(args_.model());
    try {
      check_tensor_parallel(open_weights(path)->config(), world);
    } catch (const ConfigError& e) {
      throw ConfigError("cannot split " + path + " over " + std::to_string(world) +
                        " tensor-parallel ranks: " + e.what());
    }
  }
  start();
}

bool MultiProcExecutor::restart(std::string* error) {
  kill_all();
  workers_.clear();
  if (!args_.worker_addresses().empty()) {
    *error = "workers started by hand (EngineArgs.worker_addresses) are not restarted by the engine";
    return false;
  }
  try {
    start();
    return true;
  } catch (const std::exception& e) {
    kill_all();
    workers_.clear();
    *error = e.what();
    return false;
  }
}

void MultiProcExecutor::start() {
  const int world = static_cast<int>(args_.tensor_parallel_size());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = args_.num_threads() > 0 ? args_.num_threads() : std::max<int64_t>(1, cores / world);
  const bool by_hand = !args_.worker_addresses().empty();
  if (!args_.tp_rendezvous().empty()) {
    rendezvous_ = args_.tp_rendezvous();
  } else if (by_hand && world > 1) {
    rendezvous_ = "tcp://" + HostPort::parse(split_commas(args_.worker_addresses()).front(), "worker address").host +
                  ":" + std::to_string(kDefaultStorePort);
  } else if (world > 1) {
    char tmpl[] = "/tmp/nnsight-rdzv-XXXXXX";
    if (!::mkdtemp(tmpl)) throw Error(std::string("cannot create a rendezvous directory: ") + std::strerror(errno));
    rendezvous_dir_ = tmpl;
    rendezvous_ = "file://" + rendezvous_dir_ + "/store";
  }
  if (by_hand)
    connect_workers(world);
  else
    spawn_workers(world, threads);

  for (auto& w : workers_) {
    WorkerInit init{args_, w.rank, world, rendezvous_, threads};
    if (!send_message(w.fd, MessageType::kInit, encode(init))) {
      const std::string exit = describe_exit(w);
      kill_all();
      throw Error("worker rank " + std::to_string(w.rank) + " did not accept its start-up message" + exit);
    }
  }
  std::string failure;
  std::vector<std::string> ready = collect(MessageType::kReady, kStartupTimeoutS, "start-up", &failure);
  if (!failure.empty()) {
    kill_all();
    throw Error(failure);
  }
  for (auto& w : workers_) {
    WorkerReady r;
    decode(ready[static_cast<size_t>(w.rank)], r);
    if (w.rank == 0) {
      num_kv_blocks_ = r.num_kv_blocks;
      config_ = r.config;
      structure_ = r.structure;
    } else {
      num_kv_blocks_ = std::min(num_kv_blocks_, r.num_kv_blocks);
    }
  }
  dead_ = false;
  ++starts_;
}

void MultiProcExecutor::spawn_workers(int world, int64_t threads) {
  const std::string program = find_worker_program(args_);
  for (int rank = 0; rank < world; ++rank) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      kill_all();
      throw Error(std::string("socketpair failed: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);  // the worker talks on fd 3 (dup2 clears CLOEXEC)
    std::vector<char*> argv = {const_cast<char*>(program.c_str()), const_cast<char*>("--fd"), const_cast<char*>("3"),
                               nullptr};
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, program.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    if (rc != 0) {
      ::close(sv[0]);
      kill_all();
      throw Error("cannot start worker " + program + ": " + std::strerror(rc));
    }
    workers_.push_back(Worker{pid, sv[0], rank, "pid " + std::to_string(pid)});
  }
}

void MultiProcExecutor::connect_workers(int world) {
  const std::vector<std::string> addrs = split_commas(args_.worker_addresses());
  if (static_cast<int>(addrs.size()) != world)
    throw ConfigError("EngineArgs.worker_addresses names " + std::to_string(addrs.size()) +
                      " workers but tensor_parallel_size is " + std::to_string(world));
  const std::string secret = load_worker_secret(args_.worker_secret_file());
  for (int rank = 0; rank < world; ++rank) {
    const HostPort hp = HostPort::parse(addrs[static_cast<size_t>(rank)], "EngineArgs.worker_addresses entry");
    int fd = -1;
    try {
      fd = connect_tcp(hp, kConnectTimeoutS);
      if (!secret.empty()) answer_challenge(fd, secret, kAuthTimeoutS, "worker at " + hp.str());
    } catch (const Error& e) {
      if (fd >= 0) ::close(fd);
      kill_all();
      throw Error("worker rank " + std::to_string(rank) + ": " + e.what());
    }
    workers_.push_back(Worker{-1, fd, rank, hp.str()});
  }
}

MultiProcExecutor::~MultiProcExecutor() { shutdown(); }

std::vector<pid_t> MultiProcExecutor::worker_pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w.pid);
  return out;
}

std::string MultiProcExecutor::describe_exit(Worker& w) {
  if (w.pid <= 0) return w.where.empty() ? "" : " (worker at " + w.where + ")";
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

std::vector<std::string> MultiProcExecutor::collect(MessageType expected, double timeout_s, const std::string& during,
                                                    std::string* failure) {
  using clock = std::chrono::steady_clock;
  enum class State { kWaiting, kDone, kReported, kDied, kBroke };
  const size_t n = workers_.size();
  std::vector<State> state(n, State::kWaiting);
  std::vector<std::string> payload(n), detail(n);
  const auto deadline =
      clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  std::optional<clock::time_point> grace_end;
  for (size_t i = 0; i < n; ++i)
    if (workers_[i].fd < 0) state[i] = State::kDied;  // its send already failed
  auto note_failure = [&] {
    if (!grace_end)
      grace_end =
          clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(kFailureGraceS));
  };
  if (std::any_of(state.begin(), state.end(), [](State s) { return s == State::kDied; })) note_failure();
  while (true) {
    std::vector<pollfd> fds;
    std::vector<size_t> who;
    for (size_t i = 0; i < n; ++i)
      if (state[i] == State::kWaiting) {
        fds.push_back(pollfd{workers_[i].fd, POLLIN, 0});
        who.push_back(i);
      }
    if (fds.empty()) break;
    const auto end = grace_end ? std::min(*grace_end, deadline) : deadline;
    const auto now = clock::now();
    if (now >= end) break;  // past the deadline, or the grace after a failure ended
    // Rounded up: a truncated 0 would end the wait just short of the deadline.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now).count() + 1;
    const int pr = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (pr < 0 && errno != EINTR) throw WorkerError(std::string("poll: ") + std::strerror(errno));
    if (pr <= 0) continue;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const size_t i = who[k];
      MessageType type{};
      std::string bytes;
      try {
        const double remaining = std::chrono::duration<double>(deadline - clock::now()).count();
        if (!recv_message(workers_[i].fd, std::max(remaining, 0.001), type, bytes)) continue;  // frame incomplete
      } catch (const WorkerError& e) {
        state[i] = State::kDied;
        detail[i] = e.what();
        note_failure();
        continue;
      }
      if (type == MessageType::kError) {
        state[i] = State::kReported;
        detail[i] = std::move(bytes);
        note_failure();
      } else if (type != expected) {
        state[i] = State::kBroke;
        detail[i] = "sent an unexpected message (type " + std::to_string(static_cast<uint32_t>(type)) + ")";
        note_failure();
      } else {
        state[i] = State::kDone;
        payload[i] = std::move(bytes);
      }
    }
  }
  failure->clear();
  // The culprit, most fundamental first: a rank that died, one that broke
  // the protocol, one that reported an error, one that never answered.
  for (State s : {State::kDied, State::kBroke, State::kReported, State::kWaiting}) {
    for (size_t i = 0; i < n; ++i) {
      if (state[i] != s) continue;
      Worker& w = workers_[i];
      const std::string rank = "worker rank " + std::to_string(w.rank);
      const bool startup = during == "start-up";
      if (s == State::kDied) {
        *failure = rank + (startup ? " died during start-up" : " died during " + during) + describe_exit(w);
      } else if (s == State::kBroke) {
        *failure = rank + " " + detail[i] + " during " + during;
      } else if (s == State::kReported) {
        *failure = rank + (startup ? " failed to start: " : " failed during " + during + ": ") + detail[i];
      } else {
        // No rank failed (the grace only starts on a failure, which the
        // passes above blame), so this one is waited on past the deadline.
        *failure = rank + (startup ? " did not finish starting within the timeout"
                                   : " did not finish " + during + " within " +
                                         std::to_string(static_cast<int64_t>(timeout_s)) + " s (hung)");
      }
      // What the other ranks said, for context.
      for (size_t j = 0; j < n; ++j)
        if (j != i && state[j] == State::kReported)
          *failure += "; rank " + std::to_string(workers_[j].rank) + ": " + detail[j];
      return payload;
    }
  }
  return payload;
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
    std::string dir = rendezvous_dir_;
    rendezvous_dir_.clear();
    // The rendezvous directory holds only the file store's files.
    if (auto* d = ::opendir(dir.c_str())) {
      while (auto* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") ::unlink((dir + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(dir.c_str());
  }
}

ModelRunnerOutput MultiProcExecutor::execute(const SchedulerOutput& step) {
  if (dead_) throw WorkerError("the workers are gone after an earlier failure");
  const std::string bytes = encode(step);
  for (auto& w : workers_) {
    if (!send_message(w.fd, MessageType::kStep, bytes)) {
      ::close(w.fd);  // it is gone: collect() blames it
      w.fd = -1;
    }
  }
  std::string failure;
  std::vector<std::string> replies =
      collect(MessageType::kStepDone, args_.worker_timeout_s(), "step " + std::to_string(step.step), &failure);
  if (!failure.empty()) {
    kill_all();
    dead_ = true;
    throw WorkerError(failure);
  }
  ModelRunnerOutput result;
  decode(replies.front(), result);
  return result;
}

void MultiProcExecutor::shutdown() {
  for (auto& w : workers_)
    if (w.fd >= 0) send_message(w.fd, MessageType::kShutdown, "");
  // Let them exit on their own briefly, then make sure.
  for (auto& w : workers_) {
    for (int i = 0; i < 200 && w.pid > 0; ++i) {
      if (::waitpid(w.pid, nullptr, WNOHANG) == w.pid)
        w.pid = -1;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  kill_all();
  workers_.clear();
}

}  // namespace nnsight::runner
