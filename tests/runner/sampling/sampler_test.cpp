// Sampler: a request's draws depend only on its seed and step (not on its
// batch companions), and the top-k / top-p / min-p edge cases.
#include "runner/sampling/sampler.h"
#include "support/sampling_rows.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace nnsight {
namespace {

using testing::sampling_row;

TEST(Sampler, DrawsDoNotDependOnBatchCompanions) {
  at::manual_seed(3);
  at::Tensor mine = at::randn({1, 50});
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const int64_t alone = runner::sample(mine, {sampling_row(1.0, seed, 4)}).tokens[0].item<int64_t>();
    at::Tensor batch = at::cat({at::randn({2, 50}), mine, at::randn({1, 50})}, 0);
    auto out = runner::sample(
        batch, {sampling_row(0.7, 11), sampling_row(1.0, 99), sampling_row(1.0, seed, 4), sampling_row(0.0, 0)});
    EXPECT_EQ(out.tokens[2].item<int64_t>(), alone) << "seed " << seed;
  }
}

TEST(Sampler, SeedAndStepChangeTheDraw) {
  at::Tensor logits = at::zeros({1, 1000});  // uniform
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 10; ++seed)
    for (int64_t step = 0; step < 5; ++step)
      seen.insert(runner::sample(logits, {sampling_row(1.0, seed, step)}).tokens[0].item<int64_t>());
  EXPECT_GT(seen.size(), 40u) << "50 draws from 1000 tokens should rarely repeat";
}

TEST(Sampler, FrequenciesFollowTheProbabilities) {
  at::Tensor logits = at::tensor({std::log(3.0f), 0.0f}).reshape({1, 2});  // p = 0.75, 0.25
  int zeros = 0;
  const int n = 4000;
  for (int s = 0; s < n; ++s)
    zeros += runner::sample(logits, {sampling_row(1.0, static_cast<uint64_t>(s))}).tokens[0].item<int64_t>() == 0;
  EXPECT_NEAR(static_cast<double>(zeros) / n, 0.75, 0.03);
}

TEST(Sampler, FilterEdgeCases) {
  at::Tensor logits = at::tensor({1.0f, 3.0f, 2.0f, 2.9f}).reshape({1, 4});
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto r = sampling_row(5.0, seed);  // hot: without filters any token could come
    r.top_k = 1;
    EXPECT_EQ(runner::sample(logits, {r}).tokens[0].item<int64_t>(), 1) << "top_k 1 is greedy";
    r = sampling_row(5.0, seed);
    r.top_p = 1e-9;
    EXPECT_EQ(runner::sample(logits, {r}).tokens[0].item<int64_t>(), 1) << "tiny top_p keeps the first token";
    r = sampling_row(5.0, seed);
    r.min_p = 1.0;
    EXPECT_EQ(runner::sample(logits, {r}).tokens[0].item<int64_t>(), 1) << "min_p 1 keeps the most likely";
    r = sampling_row(1.0, seed);
    r.top_k = 2;
    const int64_t t = runner::sample(logits, {r}).tokens[0].item<int64_t>();
    EXPECT_TRUE(t == 1 || t == 3) << "top_k 2 keeps the two largest, got " << t;
    r = sampling_row(1.0, seed);
    r.top_k = 100;  // more than the vocabulary: no filter, no error
    EXPECT_NO_THROW(runner::sample(logits, {r}));
  }
  EXPECT_EQ(runner::sample(logits, {sampling_row(0.0, 0)}).tokens[0].item<int64_t>(), 1) << "temperature 0 is argmax";
}

TEST(Sampler, LogprobsOfTheChosenToken) {
  at::Tensor logits = at::tensor({0.0f, 1.0f, 2.0f}).reshape({1, 3});
  auto r = sampling_row(0.0, 0);
  r.logprobs = 2;
  auto out = runner::sample(logits, {r});
  ASSERT_EQ(out.logprobs[0].top.size(), 2u);
  const double expected = 2.0 - std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0));
  EXPECT_NEAR(out.logprobs[0].logprob, expected, 1e-6);
  EXPECT_EQ(out.logprobs[0].top[0].first, 2);
}

}  // namespace
}  // namespace nnsight
