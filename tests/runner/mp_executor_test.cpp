// The multi-process executor: worker processes give the same outputs as the
// in-process executor, and a worker that dies or hangs turns into errors on
// the affected requests within a bounded time.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include <nnsight/error.hpp>

#include "runner/engine.h"
#include "runner/mp_executor.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"

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
    model_ = testing::tiny_llama();
    testing::write_hf_checkpoint(dir_.path(), *model_);
  }
  EngineArgs args() const {
    return EngineArgs().model(dir_.path()).kv_cache_memory_mb(8).show_progress(false).worker_timeout_s(60);
  }
  testing::ScratchDir dir_;
  std::shared_ptr<CausalLM> model_;
};

TEST_F(MultiProcess, TwoWorkersEqualInProcess) {
  runner::Engine inproc(args().executor("inproc"));
  auto expected = run(inproc, requests(6, 8));
  ASSERT_EQ(expected.size(), 6u);
  for (const auto& e : expected) ASSERT_EQ(e.size(), 8u);
  runner::Engine mp(args().executor("mp").tensor_parallel_size(2));
  EXPECT_EQ(run(mp, requests(6, 8)), expected);
}

TEST_F(MultiProcess, KilledWorkerFailsRequestsWithoutHanging) {
  runner::Engine engine(args().executor("mp").tensor_parallel_size(2));
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
    EXPECT_NE(done.at(id).error.find("worker rank 1"), std::string::npos) << done.at(id).error;
  }
  EXPECT_TRUE(engine.broken());
  // New work is refused with a clear message instead of hanging.
  runner::RequestInput in = requests(1, 4).front();
  EXPECT_THROW(engine.add_request(in), Error);
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
