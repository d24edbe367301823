// kernels::parallel_for: every index is run exactly once, in ranges of at
// least the grain, whatever the thread count; nested and concurrent callers
// run their work on their own thread; the workers do take part.
#include "core/kernels/parallel_chunks.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace nnsight {
namespace {

// Restores the intra-op thread count a test changes.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(ParallelChunks, EveryIndexOnceAndSmallJobsOnTheCaller) {
  for (int threads : {1, 2, 3}) {
    ThreadCount tc(threads);
    for (int64_t n : {0, 1, 5, 16, 17, 100, 1000, 4099})
      for (int64_t grain : {1, 3, 16, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n + 7));
        std::atomic<int> calls{0};
        kernels::parallel_for(7, 7 + n, grain, [&](int64_t b, int64_t e) {
          calls.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n + 7; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), i < 7 ? 0 : 1)
              << "threads " << threads << " n " << n << " grain " << grain << " index " << i;
        // No more than grain of work: one call on the caller (none for nothing).
        if (n <= grain || threads == 1) {
          EXPECT_EQ(calls.load(), n > 0 ? 1 : 0) << "n " << n << " grain " << grain;
        }
      }
  }
}

TEST(ParallelChunks, NestedCallsRunOnTheCallingThread) {
  ThreadCount tc(2);
  std::atomic<int> total{0};
  std::atomic<int> foreign{0};
  kernels::parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto outer = std::this_thread::get_id();
      kernels::parallel_for(0, 100, 1, [&](int64_t b2, int64_t e2) {
        if (std::this_thread::get_id() != outer) foreign.fetch_add(1);
        total.fetch_add(static_cast<int>(e2 - b2));
      });
    }
  });
  EXPECT_EQ(total.load(), 64 * 100);
  EXPECT_EQ(foreign.load(), 0);
}

TEST(ParallelChunks, ConcurrentCallersEachGetAllTheirWorkDone) {
  ThreadCount tc(2);
  constexpr int kCallers = 3, kRounds = 200;
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(kCallers, 0);
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      at::set_num_threads(2);
      for (int r = 0; r < kRounds; ++r) {
        std::atomic<int64_t> sum{0};
        kernels::parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i) s += i;
          sum.fetch_add(s);
        });
        sums[static_cast<size_t>(c)] += sum.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(sums[static_cast<size_t>(c)], int64_t(kRounds) * 999 * 1000 / 2);
}

TEST(ParallelChunks, WorkersTakePart) {
  ThreadCount tc(2);
  std::set<std::thread::id> ids;
  std::mutex m;
  // The caller claims chunks too, so a worker that starts late may find none
  // left: repeat long jobs until one did (bounded, not timed).
  for (int round = 0; round < 2000 && ids.size() < 2; ++round) {
    kernels::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      std::lock_guard<std::mutex> lk(m);
      ids.insert(std::this_thread::get_id());
    });
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_GE(kernels::parallel_pool_threads_started(), 1);
}

// A job's WarmHint is asked for by the idle worker after the job: every
// byte of both ranges, nothing past them, and the job's own work is done as
// without one.
TEST(ParallelChunks, IdleWorkerWarmsTheHint) {
  ThreadCount tc(2);
  std::vector<char> next(size_t(192) << 10, 1);
  kernels::WarmHint hint;
  hint.data[0] = next.data();
  hint.bytes[0] = 64 << 10;
  hint.data[1] = next.data() + (64 << 10);
  hint.bytes[1] = 128 << 10;
  const int64_t before = kernels::parallel_pool_warmed_bytes();
  int64_t warmed = 0;
  int rounds = 0;
  // The worker may be asleep or not yet started at the first job; it warms
  // once a job of its own has woken it. Bounded, not timed.
  for (; rounds < 200 && warmed < 192 << 10; ++rounds) {
    std::atomic<int64_t> sum{0};
    kernels::parallel_for_then_warm(0, 1000, 1, hint, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
    ASSERT_EQ(sum.load(), int64_t(999) * 1000 / 2);
    for (int wait = 0; wait < 100 && kernels::parallel_pool_warmed_bytes() - before < 192 << 10; ++wait)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    warmed = kernels::parallel_pool_warmed_bytes() - before;
  }
  EXPECT_GE(warmed, 192 << 10);
  // Each posted hint is warmed at most once over (a later hint restarts it).
  EXPECT_LE(warmed, int64_t(rounds) * (192 << 10));
}

}  // namespace
}  // namespace nnsight
