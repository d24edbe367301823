// FiberStackPool: stacks come back for reuse up to the cache limit, keep
// their size, and fibers run on them as on fresh ones.
#include <gtest/gtest.h>

#include <boost/context/fiber.hpp>

#include "front/trace_worker/fiber_stack_pool.h"

namespace nnsight::tracing {
namespace {

TEST(FiberStackPool, ReusesReturnedStacksUpToTheLimit) {
  FiberStackPool pool(size_t(256) << 10, 2);
  auto a = pool.take();
  auto b = pool.take();
  auto c = pool.take();
  EXPECT_GE(a.size, size_t(256) << 10);
  EXPECT_NE(a.sp, b.sp);
  pool.give_back(a);
  pool.give_back(b);
  pool.give_back(c);  // over the limit: unmapped
  EXPECT_EQ(pool.cached(), 2u);
  auto d = pool.take();
  EXPECT_EQ(d.sp, b.sp);  // last returned, first reused
  EXPECT_EQ(pool.cached(), 1u);
  pool.give_back(d);
}

TEST(FiberStackPool, FibersRunOnRecycledStacks) {
  FiberStackPool pool(size_t(256) << 10, 4);
  for (int round = 0; round < 3; ++round) {
    int steps = 0;
    {
      namespace ctx = boost::context;
      ctx::fiber f(std::allocator_arg, PooledProtectedStack(pool), [&](ctx::fiber&& caller) {
        for (int i = 0; i < 3; ++i) {
          ++steps;
          caller = std::move(caller).resume();
        }
        return std::move(caller);
      });
      while (f) f = std::move(f).resume();
    }
    EXPECT_EQ(steps, 3);
    EXPECT_EQ(pool.cached(), 1u);  // the one stack, back after each fiber
  }
}

}  // namespace
}  // namespace nnsight::tracing
