// The result thread (front/trace_client/result_thread.h) finishes traces off
// the engine's loop thread: jobs run on one other thread, in the order given;
// and a trace's result arrives through it with its saves on the host.
#include "front/trace_client/result_thread.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace nnsight::tracing {
namespace {

TEST(ResultThread, RunsJobsOnOneOtherThreadInOrder) {
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::promise<void> done;
  for (int i = 0; i < 50; ++i) {
    run_on_result_thread([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
      if (i == 49) done.set_value();
    });
  }
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  for (const auto& t : threads) {
    EXPECT_EQ(t, threads.front());
    EXPECT_NE(t, std::this_thread::get_id());
  }
}

}  // namespace
}  // namespace nnsight::tracing
