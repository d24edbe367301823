#include "core/host_copy_queue.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace nnsight {
namespace {

// Jobs run on the queue's thread, in push order, on the host tensors;
// drain() returns once all have run; a job's exception is kept, not thrown.
TEST(HostCopyQueue, JobsRunInOrderOffThePushingThreadAndDrainWaitsForThem) {
  std::vector<int64_t> seen;
  std::vector<std::thread::id> threads;
  {
    HostCopyQueue q(2);
    for (int64_t i = 0; i < 20; ++i) {
      q.push({at::full({3}, i, at::kLong)}, [&, i](std::vector<at::Tensor>& host) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ASSERT_EQ(host.size(), 1u);
        EXPECT_EQ(host[0][2].item<int64_t>(), i);
        seen.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    }
    q.push({}, [](std::vector<at::Tensor>&) { throw std::runtime_error("job 21 failed"); });
    q.drain();
    EXPECT_EQ(seen.size(), 20u) << "drain() waited for every job";
    EXPECT_EQ(q.take_errors(), std::vector<std::string>{"job 21 failed"});
    EXPECT_TRUE(q.take_errors().empty());
  }
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
  for (const auto& t : threads) EXPECT_NE(t, std::this_thread::get_id());
}

// The destructor runs what is still queued.
TEST(HostCopyQueue, DestructionRunsTheQueuedJobs) {
  std::atomic<int> ran{0};
  {
    HostCopyQueue q(8);
    for (int i = 0; i < 5; ++i)
      q.push({at::ones({2})}, [&](std::vector<at::Tensor>&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++ran;
      });
  }
  EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace nnsight
