// detail::record_call_predict_next: after one pass over a sequence of calls,
// each call predicts what the call after it read; per thread.
#include "core/kernels/call_successors.h"

#include <gtest/gtest.h>

#include <thread>

namespace nnsight {
namespace {

kernels::WarmHint reads_of(const char* p, int64_t n) {
  kernels::WarmHint h;
  h.data[0] = p;
  h.bytes[0] = n;
  h.data[1] = p + n;
  h.bytes[1] = 2 * n;
  return h;
}

TEST(CallSuccessors, EachCallPredictsTheOneAfterIt) {
  static char mem[3][256];
  const kernels::WarmHint a = reads_of(mem[0], 10), b = reads_of(mem[1], 20), c = reads_of(mem[2], 30);
  // First pass: nothing recorded yet for any key.
  EXPECT_TRUE(kernels::detail::record_call_predict_next(mem[0], a).empty());
  EXPECT_TRUE(kernels::detail::record_call_predict_next(mem[1], b).empty());
  EXPECT_TRUE(kernels::detail::record_call_predict_next(mem[2], c).empty());
  // Second pass: a predicts b, b predicts c, c predicts a (the pass wrapped).
  const kernels::WarmHint after_a = kernels::detail::record_call_predict_next(mem[0], a);
  EXPECT_EQ(after_a.data[0], b.data[0]);
  EXPECT_EQ(after_a.bytes[0], 20);
  EXPECT_EQ(after_a.data[1], b.data[1]);
  EXPECT_EQ(after_a.bytes[1], 40);
  EXPECT_EQ(kernels::detail::record_call_predict_next(mem[1], b).data[0], c.data[0]);
  EXPECT_EQ(kernels::detail::record_call_predict_next(mem[2], c).data[0], a.data[0]);
  // The order changes: a is now followed by c, and predicts it next time.
  kernels::detail::record_call_predict_next(mem[0], a);
  kernels::detail::record_call_predict_next(mem[2], c);
  EXPECT_EQ(kernels::detail::record_call_predict_next(mem[0], a).data[0], c.data[0]);
}

TEST(CallSuccessors, ThreadsKeepTheirOwnSequences) {
  static char mem[4][64];
  // Thread 1 calls mem[0] then mem[1]; this thread, in between, mem[2] and
  // mem[3]. Neither's previous call is the other's.
  kernels::detail::record_call_predict_next(mem[2], reads_of(mem[2], 1));
  std::thread t([&] {
    kernels::detail::record_call_predict_next(mem[0], reads_of(mem[0], 1));
    kernels::detail::record_call_predict_next(mem[1], reads_of(mem[1], 1));
  });
  t.join();
  kernels::detail::record_call_predict_next(mem[3], reads_of(mem[3], 1));
  std::thread t2(
      [&] { EXPECT_EQ(kernels::detail::record_call_predict_next(mem[0], reads_of(mem[0], 1)).data[0], mem[1]); });
  t2.join();
  EXPECT_EQ(kernels::detail::record_call_predict_next(mem[2], reads_of(mem[2], 1)).data[0], mem[3]);
}

}  // namespace
}  // namespace nnsight
