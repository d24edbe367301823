// AsyncEngine: many threads submit at once; futures and streaming callbacks
// deliver exactly what a single-threaded engine produces.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <nnsight/error.hpp>

#include "runner/engine/async_engine.h"
#include "support/tiny_engine.h"

namespace nnsight {
namespace {

runner::RequestInput request(int i) {
  runner::RequestInput in;
  for (int j = 0; j < 2 + i % 9; ++j) in.prompt_token_ids.push_back(4 + (i * 31 + j * 5) % 90);
  in.params = SamplingParams().temperature(0).max_tokens(6 + i % 5).ignore_eos(true);
  return in;
}

TEST(AsyncEngine, ManyThreadsGetTheirOwnResults) {
  auto model = testing::tiny_llama();
  // Expected outputs, one request at a time.
  std::vector<std::vector<int32_t>> expected;
  {
    auto engine = testing::tiny_engine(EngineArgs().kv_cache_memory_mb(8), model);
    for (int i = 0; i < 32; ++i) {
      auto id = engine->add_request(request(i));
      expected.push_back(testing::run_to_completion(*engine).at(id).token_ids);
    }
  }
  runner::AsyncEngine async(testing::tiny_engine(EngineArgs().kv_cache_memory_mb(8), model));
  std::vector<std::vector<int32_t>> got(32), streamed(32);
  std::vector<std::thread> threads;
  std::atomic<int> callbacks{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<int, runner::RequestHandle>> mine;
      for (int i = t; i < 32; i += 4) {
        mine.emplace_back(i, async.submit(request(i), [&, i](const RequestOutput& o) {
          ++callbacks;
          streamed[static_cast<size_t>(i)] = o.token_ids;  // cumulative snapshots
        }));
      }
      for (auto& [i, h] : mine) got[static_cast<size_t>(i)] = h.result.get().token_ids;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(got, expected);
  EXPECT_EQ(streamed, expected);
  EXPECT_GE(callbacks.load(), 32 * 6);  // at least one update per generated token
}

TEST(AsyncEngine, BadParamsThrowOnTheCallersThreadAndTooLongPromptsFailTheFuture) {
  runner::AsyncEngine async(testing::tiny_engine(EngineArgs().kv_cache_memory_mb(8), testing::tiny_llama()));
  runner::RequestInput bad = request(0);
  bad.params.top_p(0);
  EXPECT_THROW(async.submit(bad), ConfigError);
  runner::RequestInput too_long = request(0);
  too_long.prompt_token_ids.assign(300, 7);  // the tiny model serves 256 positions
  auto h = async.submit(too_long);
  EXPECT_THROW(h.result.get(), ConfigError);
  // The engine still serves afterwards.
  EXPECT_EQ(async.submit(request(1)).result.get().token_ids.size(), 7u);
}

TEST(AsyncEngine, ShutdownEndsUnfinishedRequests) {
  auto async = std::make_unique<runner::AsyncEngine>(
      testing::tiny_engine(EngineArgs().kv_cache_memory_mb(8), testing::tiny_llama()));
  runner::RequestInput in = request(2);
  in.params.max_tokens(200);
  // The first update holds the loop until shutdown has been asked for, so the
  // request is certainly unfinished when the loop sees the stop.
  std::atomic<bool> started{false}, go{false};
  auto h = async->submit(in, [&](const RequestOutput&) {
    started = true;
    while (!go) std::this_thread::yield();
  });
  while (!started) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    go = true;
  });
  async->shutdown();
  releaser.join();
  auto out = h.result.get();
  EXPECT_TRUE(out.finished);
  EXPECT_EQ(out.finish_reason, FinishReason::kError);
  EXPECT_LT(out.token_ids.size(), 200u);
  EXPECT_THROW(async->submit(request(3)), Error);
}

}  // namespace
}  // namespace nnsight
