// HostCopies (core/host_copies.h): every tensor reaches the host with its
// values, sizes and dtype, in the order given; CPU and undefined tensors pass
// through; a second wait() is refused. On a GPU the copies go through a side
// stream into pinned memory, after the work queued before start() (a kernel
// still running when start() is called is copied finished), and the copies
// hold the device memory until they land.
#include "core/host_copies.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tp/nccl_process_group.h"

namespace nnsight {
namespace {

TEST(HostCopies, CpuAndUndefinedTensorsPassThroughInOrder) {
  const at::Tensor a = at::randn({3, 4}), b = at::arange(5);
  HostCopies c = HostCopies::start({a, at::Tensor(), b});
  EXPECT_EQ(c.asynchronous(), 0u);
  const auto out = c.wait();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].is_same(a));
  EXPECT_FALSE(out[1].defined());
  EXPECT_TRUE(out[2].is_same(b));
  EXPECT_THROW(c.wait(), c10::Error);
}

TEST(HostCopies, GpuTensorsLandInPinnedMemoryAfterTheQueuedWork) {
  if (!at::hasCUDA() || tp::cuda_device_count() < 1) GTEST_SKIP() << "HostCopies GPU test skipped: no CUDA GPU";
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  at::Tensor x = at::randn({2048, 2048}, cuda);
  // Queued on the compute stream just before start(): a matmul chain the
  // copy must wait for.
  at::Tensor y = x;
  for (int i = 0; i < 8; ++i) y = at::tanh(at::matmul(y, x) * 1e-3);
  const at::Tensor half = y.to(at::kBFloat16).narrow(1, 3, 100);  // a strided view
  HostCopies c = HostCopies::start({y, at::Tensor(), half, at::ones({2})});
  const at::Tensor y_ref = y.clone();  // queued after the chain, on the compute stream
  EXPECT_EQ(c.asynchronous(), 2u);
  y = at::Tensor();  // the copies keep the device memory alive
  const auto out = c.wait();
  ASSERT_EQ(out.size(), 4u);
  ASSERT_TRUE(out[0].device().is_cpu());
  EXPECT_TRUE(out[0].is_pinned());
  EXPECT_TRUE(at::equal(out[0], y_ref.cpu()));
  EXPECT_EQ(out[2].scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(out[2], y_ref.to(at::kBFloat16).narrow(1, 3, 100).cpu()));
  EXPECT_FALSE(out[1].defined());
  EXPECT_TRUE(at::equal(out[3], at::ones({2})));
}

}  // namespace
}  // namespace nnsight
