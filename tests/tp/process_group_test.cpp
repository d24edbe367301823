// Process groups: gloo through c10d with a file store and with a TCP store,
// ranks as threads of this process. Each collective is checked against the
// same arithmetic done directly on the ranks' known inputs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include <nnsight/error.hpp>

#include "support/scratch_dir.h"
#include "support/thread_ranks.h"
#include "tp/collective_error.h"
#include "tp/gloo_process_group.h"
#include "tp/make_process_group.h"
#include "tp/rendezvous.h"

namespace nnsight {
namespace {

// What rank r contributes: distinct, exactly representable values.
at::Tensor input_of(int r, at::IntArrayRef shape, at::ScalarType dtype = at::kFloat) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return (at::arange(n, at::kFloat).reshape(shape) + 100 * r).to(dtype);
}

void check_collectives(tp::ParallelContext& ctx) {
  const int r = ctx.rank(), w = ctx.world_size();
  ASSERT_EQ(ctx.group->backend(), "gloo");
  // all-reduce, float32: sum over ranks of arange + 100 r.
  at::Tensor t = input_of(r, {2, 3});
  ctx.group->all_reduce_sum(t);
  at::Tensor expect = at::zeros({2, 3});
  for (int k = 0; k < w; ++k) expect += input_of(k, {2, 3});
  EXPECT_TRUE(at::equal(t, expect));
  // bfloat16 and a non-contiguous view are reduced and written back in place.
  at::Tensor b = input_of(r, {4}, at::kBFloat16);
  ctx.group->all_reduce_sum(b);
  EXPECT_EQ(b.scalar_type(), at::kBFloat16);
  at::Tensor bexp = at::zeros({4});
  for (int k = 0; k < w; ++k) bexp += input_of(k, {4});
  EXPECT_TRUE(at::equal(b, bexp.to(at::kBFloat16)));  // summed in float32, rounded once
  at::Tensor base = input_of(r, {3, 2});
  at::Tensor view = base.t();  // [2, 3], not contiguous
  ctx.group->all_reduce_sum(view);
  at::Tensor vexp = at::zeros({3, 2});
  for (int k = 0; k < w; ++k) vexp += input_of(k, {3, 2});
  EXPECT_TRUE(at::equal(base, vexp));
  // all-gather on the first and the last dimension.
  std::vector<at::Tensor> parts;
  for (int k = 0; k < w; ++k) parts.push_back(input_of(k, {2, 3}));
  EXPECT_TRUE(at::equal(ctx.group->all_gather(input_of(r, {2, 3}), 0), at::cat(parts, 0)));
  EXPECT_TRUE(at::equal(ctx.group->all_gather(input_of(r, {2, 3}), -1), at::cat(parts, 1)));
  // broadcast from the last rank.
  at::Tensor x = input_of(r, {5});
  ctx.group->broadcast(x, w - 1);
  EXPECT_TRUE(at::equal(x, input_of(w - 1, {5})));
  ctx.group->barrier();
}

TEST(ProcessGroup, GlooIsAvailableInThisBuild) {
  // Debian's LibTorch with libgloo-dev, and the pip wheels, both have it.
  EXPECT_TRUE(tp::gloo_available());
}

TEST(ProcessGroup, GlooThreeRanksThroughAFileStore) { testing::run_ranks(3, check_collectives); }

// LibTorch 2.x's flight recorder races when several groups in one process
// record their first collectives at once (tp/c10d_backend.cpp): a gloo group
// turns it off before it exists, unless the user set its variable.
TEST(ProcessGroup, GlooGroupsTurnPyTorchsFlightRecorderOffUnlessAsked) {
  const char* before = std::getenv("TORCH_FR_BUFFER_SIZE");
  const bool user_asked = before != nullptr || std::getenv("TORCH_NCCL_TRACE_BUFFER_SIZE") != nullptr;
  const std::string user_value = before != nullptr ? before : "";
  testing::run_ranks(2, [](tp::ParallelContext& ctx) { ctx.group->barrier(); });
  const char* after = std::getenv("TORCH_FR_BUFFER_SIZE");
  if (user_asked) {
    EXPECT_EQ(after != nullptr ? std::string(after) : std::string(), user_value) << "the user's setting is kept";
  } else {
    ASSERT_NE(after, nullptr);
    EXPECT_STREQ(after, "0");
  }
}

TEST(ProcessGroup, GlooTwoRanksThroughATcpStore) {
  testing::run_ranks(2, check_collectives, "tcp://127.0.0.1:" + std::to_string(testing::free_tcp_port()));
}

TEST(ProcessGroup, WorldSizeOneNeverCommunicates) {
  auto g = tp::make_process_group(tp::ProcessGroupOptions());  // no rendezvous at all
  EXPECT_EQ(g->backend(), "single");
  at::Tensor t = at::arange(4, at::kFloat);
  g->all_reduce_sum(t);
  EXPECT_TRUE(at::equal(t, at::arange(4, at::kFloat)));
  EXPECT_TRUE(at::equal(g->all_gather(t, 0), t));
}

TEST(ProcessGroup, BadOptionsAreConfigErrors) {
  auto make = [](tp::ProcessGroupOptions o) { tp::make_process_group(o); };
  EXPECT_THROW(make(tp::ProcessGroupOptions().with_backend("mpi").with_world_size(2).with_rendezvous("tcp://a:1")),
               ConfigError);
  EXPECT_THROW(make(tp::ProcessGroupOptions().with_rank(2).with_world_size(2).with_rendezvous("tcp://a:1")),
               ConfigError);
  try {
    make(tp::ProcessGroupOptions().with_world_size(2).with_rendezvous("http://host:80"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'http://host:80' has an unknown scheme"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, ParsesFileAndTcpForms) {
  auto f = tp::Rendezvous::parse("file:///tmp/x/store");
  EXPECT_EQ(f.kind, tp::Rendezvous::Kind::kFile);
  EXPECT_EQ(f.path, "/tmp/x/store");
  auto t = tp::Rendezvous::parse("tcp://10.0.0.2:29500");
  EXPECT_EQ(t.host, "10.0.0.2");
  EXPECT_EQ(t.port, 29500);
  EXPECT_FALSE(t.loopback());
  auto v6 = tp::Rendezvous::parse("tcp://[::1]:7");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_TRUE(v6.loopback());
  EXPECT_EQ(v6.str(), "tcp://[::1]:7");
  for (const char* bad : {"file://relative", "tcp://host", "tcp://:80", "tcp://h:0", "tcp://h:99999", "tcp://h:8x"})
    EXPECT_THROW(tp::Rendezvous::parse(bad), ConfigError) << bad;
}

TEST(ProcessGroup, APeerThatLeavesBreaksTheCollectiveWithinTheTimeout) {
  testing::ScratchDir dir;
  const std::string where = "file://" + dir.file("store");
  std::string message;
  std::promise<void> joined;  // rank 0 has its group: only then may the peer leave
  const auto t0 = std::chrono::steady_clock::now();
  std::thread peer([&] {
    try {
      auto g = tp::make_process_group(
          tp::ProcessGroupOptions().with_rank(1).with_world_size(2).with_rendezvous(where).with_timeout(
              std::chrono::seconds(10)));
      joined.get_future().wait_for(std::chrono::seconds(30));
    } catch (...) {
    }
    // Leaves without taking part: its group (and its connections) go away.
  });
  bool collective_error = false;
  try {
    std::shared_ptr<tp::ProcessGroup> g;
    try {
      g = tp::make_process_group(
          tp::ProcessGroupOptions().with_rank(0).with_world_size(2).with_rendezvous(where).with_timeout(
              std::chrono::seconds(10)));
    } catch (...) {
      joined.set_value();
      throw;
    }
    joined.set_value();
    peer.join();
    at::Tensor t = at::ones({8});
    g->all_reduce_sum(t);
  } catch (const tp::CollectiveError& e) {
    collective_error = true;
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("not a CollectiveError: ") + e.what();
  }
  if (peer.joinable()) peer.join();
  EXPECT_TRUE(collective_error) << message;
  EXPECT_NE(message.find("all-reduce failed on rank 0 of 2 (gloo)"), std::string::npos) << message;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

}  // namespace
}  // namespace nnsight
