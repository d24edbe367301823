// The device path's sampler (runner/sampling/device_sampler.h), on the CPU
// (the same ATen calls a GPU runs): its noise is splitmix64 of (key, token
// id) -- checked against a plain scalar splitmix64 written here -- uniform
// and stateless; its draws follow the filtered distribution (temperature,
// top-k, top-p, min-p, worked out by hand below) and never leave the tokens
// the filters keep; a row's draw does not depend on its batch companions; and
// the sampler takes it on the device path.
#include "runner/sampling/device_sampler.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernels/kernel_path.h"
#include "runner/sampling/sampler.h"
#include "support/sampling_rows.h"
#include "tp/nccl_process_group.h"

namespace nnsight {
namespace {

uint64_t splitmix(uint64_t key, uint64_t id) {
  uint64_t z = key + (id + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t as_signed(uint64_t u) {
  int64_t s;
  std::memcpy(&s, &u, sizeof s);
  return s;
}

using testing::sampling_row;

TEST(DeviceSampler, NoiseIsSplitmixOfKeyAndTokenAndUniform) {
  const std::vector<uint64_t> keys = {0, 1, 0xdeadbeefcafef00dull, runner::mix_seed(7, 3)};
  std::vector<int64_t> signed_keys;
  for (uint64_t k : keys) signed_keys.push_back(as_signed(k));
  const int64_t vocab = 50000;
  const at::Tensor u = runner::hashed_uniform(at::tensor(signed_keys, at::kLong), at::arange(vocab, at::kLong));
  ASSERT_EQ(u.sizes(), (std::vector<int64_t>{4, vocab}));
  for (size_t r = 0; r < keys.size(); ++r)
    for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{12345}, vocab - 1}) {
      const double expect =
          (static_cast<double>(splitmix(keys[r], static_cast<uint64_t>(id)) >> 11) + 0.5) / 9007199254740992.0;
      EXPECT_EQ(u[static_cast<int64_t>(r)][id].item<double>(), expect) << "key " << keys[r] << " id " << id;
    }
  EXPECT_GT(u.min().item<double>(), 0.0);
  EXPECT_LT(u.max().item<double>(), 1.0);
  EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.005);
  EXPECT_NEAR(u.var().item<double>(), 1.0 / 12, 0.002);
  // Row 1 alone is row 1 of the batch.
  EXPECT_TRUE(at::equal(
      runner::hashed_uniform(at::tensor({signed_keys[1]}, at::kLong), at::arange(vocab, at::kLong))[0], u[1]));
}

TEST(DeviceSampler, DrawsFollowTheFilteredDistribution) {
  // Six tokens; temperature 0.5 doubles the logits. top_k 5 drops token 5,
  // top_p 0.95 drops the tail past 0.95 of the mass, min_p 0.02 what is under
  // 2 % of the top token's probability.
  const std::vector<float> logit = {2.0f, 1.5f, 1.0f, 0.2f, -0.5f, 1.9f};
  auto r = sampling_row(0.5, 42, 0);
  r.top_k = 5;
  r.top_p = 0.95;
  r.min_p = 0.02;
  // The filters by hand: probabilities after temperature and top-k ...
  std::vector<double> p(6, 0.0);
  double total = 0;
  for (int i : {0, 1, 2, 3, 5}) total += std::exp(2.0 * logit[static_cast<size_t>(i)]);
  for (int i : {0, 1, 2, 3, 5}) p[static_cast<size_t>(i)] = std::exp(2.0 * logit[static_cast<size_t>(i)]) / total;
  // ... top-p in descending order (0, 5, 1, 2, 3): keep while the mass before is under 0.95 ...
  double before = 0;
  for (int i : {0, 5, 1, 2, 3}) {
    const double q = p[static_cast<size_t>(i)];
    if (before >= 0.95) p[static_cast<size_t>(i)] = 0;
    before += q;
  }
  // ... min-p against the largest.
  for (double& q : p)
    if (q < 0.02 * p[0]) q = 0;
  double kept = 0;
  for (double q : p) kept += q;
  ASSERT_EQ(p[4], 0.0);
  ASSERT_EQ(p[3], 0.0) << "the hand computation: token 3 falls to top-p or min-p";

  const int64_t n = 40000;
  std::vector<runner::SamplingRow> rows(static_cast<size_t>(n), r);
  std::vector<const runner::SamplingRow*> ptrs;
  for (int64_t i = 0; i < n; ++i) {
    rows[static_cast<size_t>(i)].step = i;
    ptrs.push_back(&rows[static_cast<size_t>(i)]);
  }
  const at::Tensor logits = at::tensor(logit).unsqueeze(0).expand({n, 6}).contiguous();
  const at::Tensor tokens = runner::sample_on_device(logits, ptrs);
  const at::Tensor counts = at::bincount(tokens, {}, 6).to(at::kDouble) / static_cast<double>(n);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_NEAR(counts[i].item<double>(), p[static_cast<size_t>(i)] / kept, 0.01) << "token " << i;
  EXPECT_EQ(counts[3].item<double>(), 0.0);
  EXPECT_EQ(counts[4].item<double>(), 0.0);
}

TEST(DeviceSampler, ARowsDrawDoesNotDependOnItsCompanions) {
  at::manual_seed(9);
  const at::Tensor mine = at::randn({1, 300});
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto r = sampling_row(0.9, seed, 5);
    r.top_p = 0.8;
    const int64_t alone = runner::sample_on_device(mine, {&r}).item<int64_t>();
    const auto a = sampling_row(1.3, 1, 1), b = sampling_row(0.4, 2, 9);
    const at::Tensor batch = at::cat({at::randn({1, 300}), mine, at::randn({1, 300})}, 0);
    EXPECT_EQ(runner::sample_on_device(batch, {&a, &r, &b})[1].item<int64_t>(), alone) << "seed " << seed;
  }
}

TEST(DeviceSampler, TheSamplerUsesItOnTheDevicePath) {
  at::manual_seed(10);
  const at::Tensor logits = at::randn({3, 200});
  std::vector<runner::SamplingRow> rows = {sampling_row(0.0, 0, 0), sampling_row(0.8, 17, 2), sampling_row(1.2, 18, 3)};
  rows[2].logprobs = 2;
  runner::SamplerOutput out;
  {
    kernels::ForceDevicePath device;
    out = runner::sample(logits, rows);
  }
  EXPECT_EQ(out.tokens[0].item<int64_t>(), logits[0].argmax().item<int64_t>()) << "greedy rows take the argmax";
  const std::vector<const runner::SamplingRow*> sampled = {&rows[1], &rows[2]};
  const at::Tensor expect = runner::sample_on_device(logits.narrow(0, 1, 2), sampled);
  EXPECT_EQ(out.tokens[1].item<int64_t>(), expect[0].item<int64_t>());
  EXPECT_EQ(out.tokens[2].item<int64_t>(), expect[1].item<int64_t>());
  EXPECT_EQ(out.logprobs[2].token, out.tokens[2].item<int64_t>()) << "log-probabilities of the sampled token";
  EXPECT_EQ(out.logprobs[2].top.size(), 2u);
}

// On a GPU: the same noise bit for bit (integer arithmetic wraps alike), and
// the same draws from the same logits but where float rounding in the
// softmax tips a race (at most 1 row in 100).
TEST(DeviceSampler, TheGpuDrawsWhatTheCpuDraws) {
  if (!at::hasCUDA() || tp::cuda_device_count() < 1) GTEST_SKIP() << "DeviceSampler GPU test skipped: no CUDA GPU";
  const at::Device gpu(at::kCUDA);
  const at::Tensor keys =
      at::randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), {7}, at::kLong);
  const at::Tensor ids = at::arange(128256, at::kLong);
  EXPECT_TRUE(at::equal(runner::hashed_uniform(keys.to(gpu), ids.to(gpu)).cpu(), runner::hashed_uniform(keys, ids)));
  at::manual_seed(11);
  const int64_t n = 1000;
  const at::Tensor logits = at::randn({n, 5000}) * 3;
  std::vector<runner::SamplingRow> rows(static_cast<size_t>(n), sampling_row(0.9, 5, 0));
  std::vector<const runner::SamplingRow*> ptrs;
  for (int64_t i = 0; i < n; ++i) {
    rows[static_cast<size_t>(i)].step = i;
    rows[static_cast<size_t>(i)].top_p = 0.9;
    ptrs.push_back(&rows[static_cast<size_t>(i)]);
  }
  const at::Tensor cpu = runner::sample_on_device(logits, ptrs);
  const at::Tensor on_gpu = runner::sample_on_device(logits.to(gpu), ptrs).cpu();
  EXPECT_GE(cpu.eq(on_gpu).sum().item<int64_t>(), n - n / 100);
}

}  // namespace
}  // namespace nnsight
