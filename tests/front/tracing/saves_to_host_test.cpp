// SavesToHost (front/trace_client/saves_to_host.h): saves already on the host
// are left as they are (nothing started, nothing to land); on a GPU every
// save, single or list, lands on the host with its values, in its place.
#include "front/trace_client/saves_to_host.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tp/nccl_process_group.h"

namespace nnsight {
namespace {

std::vector<RequestOutput> outputs_with(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  std::vector<RequestOutput> outs(2);
  outs[0].saves["a"] = a;
  outs[0].saves["list"] = SavedValue::of_list({b, c});
  outs[1].saves["b"] = b;
  return outs;
}

TEST(SavesToHost, SavesOnTheHostStayAsTheyAre) {
  const at::Tensor a = at::randn({2, 3}), b = at::arange(4), c = at::ones({1});
  auto outs = outputs_with(a, b, c);
  tracing::SavesToHost saves(outs);
  EXPECT_FALSE(saves.any());
  EXPECT_TRUE(saves.land(outs));
  EXPECT_TRUE(outs[0].saves.at("a").tensor.is_same(a));
  EXPECT_TRUE(outs[0].saves.at("list").list[1].is_same(c));
  EXPECT_EQ(outs[0].error, "");
}

TEST(SavesToHost, GpuSavesLandOnTheHostInTheirPlaces) {
  if (!at::hasCUDA() || tp::cuda_device_count() < 1) GTEST_SKIP() << "SavesToHost GPU test skipped: no CUDA GPU";
  const at::Tensor a = at::randn({64, 512}), b = at::arange(4), c = at::ones({1});
  auto outs = outputs_with(a.cuda(), b, c.cuda());  // b stays on the host
  tracing::SavesToHost saves(outs);
  EXPECT_TRUE(saves.any());
  EXPECT_TRUE(saves.land(outs));
  EXPECT_TRUE(outs[0].saves.at("a").tensor.device().is_cpu());
  EXPECT_TRUE(at::equal(outs[0].saves.at("a").tensor, a));
  EXPECT_TRUE(at::equal(outs[0].saves.at("list").list[0], b));
  EXPECT_TRUE(at::equal(outs[0].saves.at("list").list[1], c));
  EXPECT_TRUE(outs[0].saves.at("list").list[1].device().is_cpu());
  EXPECT_TRUE(at::equal(outs[1].saves.at("b").tensor, b));
}

}  // namespace
}  // namespace nnsight
