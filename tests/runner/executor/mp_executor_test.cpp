// The multi-process executor: worker processes (tensor-parallel ranks) give
// the same outputs as the in-process executor, whether the engine starts
// them or they are started by hand and rendezvous through a TCP store; a
// worker that dies or hangs turns into errors on the affected requests
// within a bounded time.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <nnsight/error.hpp>

#include "runner/engine/engine.h"
#include "runner/executor/mp_executor.h"
#include "runner/executor/tcp_endpoint.h"
#include "support/hand_started_workers.h"
#include "support/scratch_dir.h"
#include "support/thread_ranks.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

using testing::run_to_completion;

std::vector<runner::RequestInput> requests(int n, int64_t max_tokens) {
  std::vector<runner::RequestInput> out;
  for (int i = 0; i < n; ++i) {
    runner::RequestInput in;
    for (int j = 0; j < 3 + 5 * i; ++j) in.prompt_token_ids.push_back(5 + (i * 13 + j * 7) % 90);
    in.params = SamplingParams().temperature(i % 2 ? 0.8 : 0.0).seed(40 + i).max_tokens(max_tokens).ignore_eos(true);
    out.push_back(in);
  }
  return out;
}

std::vector<std::vector<int32_t>> run(runner::Engine& engine, std::vector<runner::RequestInput> reqs) {
  auto ids = engine.add_requests(std::move(reqs));
  auto done = run_to_completion(engine);
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids) {
    EXPECT_EQ(done.at(id).error, "");
    out.push_back(done.at(id).token_ids);
  }
  return out;
}

class MultiProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::tiny_random_model(testing::tiny_tp_llama_config(), 11);  // divides over 2 ranks
    testing::write_hf_checkpoint(dir_.path(), *model_);
  }
  EngineArgs args() const {
    return EngineArgs().model(dir_.path()).kv_cache_memory_mb(8).show_progress(false).worker_timeout_s(60);
  }
  testing::ScratchDir dir_;
  std::shared_ptr<CausalLM> model_;
};

TEST_F(MultiProcess, TwoRanksEqualInProcess) {
  runner::Engine inproc(args().executor("inproc"));
  auto expected = run(inproc, requests(6, 8));
  ASSERT_EQ(expected.size(), 6u);
  for (const auto& e : expected) ASSERT_EQ(e.size(), 8u);
  runner::Engine mp(args().executor("mp").tensor_parallel_size(2));
  EXPECT_EQ(run(mp, requests(6, 8)), expected);
  runner::Engine one(args().executor("mp"));  // one worker process, no group
  EXPECT_EQ(run(one, requests(6, 8)), expected);
}

TEST_F(MultiProcess, RanksRendezvousThroughATcpStore) {
  runner::Engine inproc(args().executor("inproc"));
  auto expected = run(inproc, requests(3, 6));
  const std::string store = "tcp://127.0.0.1:" + std::to_string(testing::free_tcp_port());
  runner::Engine mp(args().tensor_parallel_size(2).tp_rendezvous(store));
  EXPECT_EQ(dynamic_cast<runner::MultiProcExecutor&>(mp.executor()).rendezvous(), store);
  EXPECT_EQ(run(mp, requests(3, 6)), expected);
}

TEST_F(MultiProcess, WorkersStartedByHandServeTheEngine) {
  runner::Engine inproc(args().executor("inproc"));
  auto expected = run(inproc, requests(3, 6));
  testing::HandStartedWorkers workers(2);
  const std::string store = "tcp://127.0.0.1:" + std::to_string(testing::free_tcp_port());
  {
    runner::Engine mp(args().tensor_parallel_size(2).worker_addresses(workers.addresses()).tp_rendezvous(store));
    EXPECT_EQ(run(mp, requests(3, 6)), expected);
  }
  // Each served one engine and exits when it shuts down.
  for (size_t i = 0; i < 2; ++i) {
    const int status = workers.wait_exit(i, 10);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker " << i << " status " << status;
  }
}

// Workers started by hand with a secret (worker_auth.h): a connection that
// does not know it is refused before anything it sends is decoded, and the
// worker goes on listening; an engine with a wrong secret is told so; the
// engine with the right one is served.
TEST_F(MultiProcess, HandStartedWorkersWithASecretServeOnlyTheirEngine) {
  runner::Engine inproc(args().executor("inproc"));
  auto expected = run(inproc, requests(2, 5));
  ::setenv("NNSIGHT_WORKER_SECRET", "correct horse battery staple", 1);
  testing::HandStartedWorkers workers(1);
  ::unsetenv("NNSIGHT_WORKER_SECRET");
  const runner::HostPort where = runner::HostPort::parse(workers.addresses(), "test");

  // An intruder sends a start-up message at once: it gets the challenge, fails it and is cut off.
  {
    const int fd = runner::connect_tcp(where, 5);
    unsigned char challenge[45];
    size_t got = 0;
    while (got < sizeof challenge) {
      const ssize_t r = ::read(fd, challenge + got, sizeof challenge - got);
      ASSERT_GT(r, 0);
      got += static_cast<size_t>(r);
    }
    EXPECT_EQ(std::string(reinterpret_cast<char*>(challenge), 13), "NNSIGHT-AUTH1");
    const std::string init(64, 'x');  // not the HMAC of the challenge
    ASSERT_EQ(::write(fd, init.data(), init.size()), static_cast<ssize_t>(init.size()));
    char c;
    EXPECT_LE(::read(fd, &c, 1), 0) << "the worker must close (or reset) the connection";
    ::close(fd);
  }
  // An engine with the wrong secret is refused, with a message that says so.
  testing::ScratchDir secrets;
  try {
    runner::Engine wrong(
        args().worker_addresses(workers.addresses()).worker_secret_file(secrets.write("wrong", "not the secret\n")));
    FAIL() << "a wrong secret must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("refused the authentication"), std::string::npos) << e.what();
  }
  // Still listening: the right secret (from a file this time) is served.
  runner::Engine right(args()
                           .worker_addresses(workers.addresses())
                           .worker_secret_file(secrets.write("right", "correct horse battery staple\n")));
  EXPECT_EQ(run(right, requests(2, 5)), expected);
}

TEST_F(MultiProcess, AHandStartedWorkerThatDiesIsNamedByRankAndAddress) {
  testing::HandStartedWorkers workers(2);
  const std::string store = "tcp://127.0.0.1:" + std::to_string(testing::free_tcp_port());
  runner::Engine engine(args().tensor_parallel_size(2).worker_addresses(workers.addresses()).tp_rendezvous(store));
  auto ids = engine.add_requests(requests(2, 200));
  engine.step();
  ::kill(workers.pids().at(1), SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  auto done = run_to_completion(engine);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  const std::string addr1 = workers.addresses().substr(workers.addresses().find(',') + 1);
  for (auto id : ids) {
    EXPECT_EQ(done.at(id).finish_reason, FinishReason::kError);
    EXPECT_NE(done.at(id).error.find("worker rank 1 died during step"), std::string::npos) << done.at(id).error;
    EXPECT_NE(done.at(id).error.find(addr1), std::string::npos) << done.at(id).error;
  }
}

TEST_F(MultiProcess, WorkerAddressesMustMatchTheSize) {
  EXPECT_THROW(runner::Engine(args().tensor_parallel_size(2).worker_addresses("127.0.0.1:1")), ConfigError);
  EXPECT_THROW(runner::Engine(args().tensor_parallel_size(1).worker_addresses("127.0.0.1")), ConfigError);
  EXPECT_THROW(runner::Engine(args().tensor_parallel_size(2).tp_rendezvous("udp://x:1")), ConfigError);
}

TEST_F(MultiProcess, KilledWorkerFailsRequestsWithoutHanging) {
  // Restarts off: the engine stops serving and says why.
  runner::Engine engine(args().executor("mp").tensor_parallel_size(2).max_worker_restarts(0));
  auto& exec = dynamic_cast<runner::MultiProcExecutor&>(engine.executor());
  auto ids = engine.add_requests(requests(4, 200));
  engine.step();
  engine.step();
  ::kill(exec.worker_pids().at(1), SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  auto done = run_to_completion(engine);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 30.0);
  for (auto id : ids) {
    ASSERT_TRUE(done.count(id));
    EXPECT_EQ(done.at(id).finish_reason, FinishReason::kError);
    EXPECT_NE(done.at(id).error.find("worker rank 1 died"), std::string::npos) << done.at(id).error;
  }
  EXPECT_TRUE(engine.broken());
  // New work is refused with a clear message instead of hanging.
  runner::RequestInput in = requests(1, 4).front();
  try {
    engine.add_request(in);
    FAIL() << "a broken engine must refuse new requests";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker rank 1 died"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_worker_restarts 0"), std::string::npos) << e.what();
  }
}

// By default the engine starts the workers again: the running requests fail
// with the reason, later ones are served as before the failure.
TEST_F(MultiProcess, KilledWorkerIsRestartedAndLaterRequestsAreServed) {
  auto reference = [&] {
    runner::Engine ref(args().executor("mp").tensor_parallel_size(2));
    auto ids = ref.add_requests(requests(2, 6));
    auto done = run_to_completion(ref);
    return std::vector<std::vector<int32_t>>{done.at(ids[0]).token_ids, done.at(ids[1]).token_ids};
  }();
  runner::Engine engine(args().executor("mp").tensor_parallel_size(2));
  auto& exec = dynamic_cast<runner::MultiProcExecutor&>(engine.executor());
  const std::vector<pid_t> first = exec.worker_pids();
  auto doomed = engine.add_requests(requests(3, 200));
  engine.step();
  ::kill(first.at(1), SIGKILL);
  auto done = run_to_completion(engine);
  for (auto id : doomed) {
    EXPECT_EQ(done.at(id).finish_reason, FinishReason::kError);
    EXPECT_NE(done.at(id).error.find("worker rank 1 died"), std::string::npos) << done.at(id).error;
  }
  EXPECT_FALSE(engine.broken());
  EXPECT_EQ(engine.worker_restarts(), 1);
  EXPECT_EQ(exec.starts(), 2);
  EXPECT_NE(exec.worker_pids(), first);
  auto later = engine.add_requests(requests(2, 6));
  auto served = run_to_completion(engine);
  for (size_t i = 0; i < later.size(); ++i) {
    EXPECT_EQ(served.at(later[i]).error, "");
    EXPECT_EQ(served.at(later[i]).token_ids, reference[i]) << "request " << i;
  }
}

TEST_F(MultiProcess, HungWorkerTimesOut) {
  runner::Engine engine(args().executor("mp").tensor_parallel_size(2).worker_timeout_s(2));
  auto& exec = dynamic_cast<runner::MultiProcExecutor&>(engine.executor());
  auto ids = engine.add_requests(requests(2, 200));
  engine.step();
  ::kill(exec.worker_pids().at(0), SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  auto done = run_to_completion(engine);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 20.0);
  for (auto id : ids) {
    EXPECT_EQ(done.at(id).finish_reason, FinishReason::kError);
    EXPECT_NE(done.at(id).error.find("hung"), std::string::npos) << done.at(id).error;
  }
}

}  // namespace
}  // namespace nnsight
