// greedy_tokens against at::argmax(1): random rows of lengths around the
// vector width, ties (the first maximum wins), +0 / -0, infinities and NaNs.
#include "runner/sampling/greedy.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace nnsight {
namespace {

void expect_like_argmax(const at::Tensor& logits, const std::string& what) {
  at::Tensor got = runner::greedy_tokens(logits), want = logits.argmax(1);
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(at::equal(got, want)) << what << ": " << got << " vs " << want;
}

TEST(Greedy, EqualsArgmaxOnRandomRows) {
  at::manual_seed(5);
  for (int64_t n : {1, 2, 15, 16, 17, 33, 1000, 49152})
    expect_like_argmax(at::randn({3, n}), "n = " + std::to_string(n));
}

TEST(Greedy, FirstOfEqualMaximaZerosInfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  at::Tensor ties = at::zeros({2, 40});
  ties[0][7] = 3.f;
  ties[0][23] = 3.f;  // first of two maxima: 7
  ties[1][35] = 3.f;  // in the tail
  expect_like_argmax(ties, "ties");
  at::Tensor zeros = at::full({1, 20}, -1.f);
  zeros[0][4] = -0.f;
  zeros[0][9] = 0.f;  // -0 and +0 compare equal: 4
  expect_like_argmax(zeros, "signed zeros");
  at::Tensor infs = at::full({2, 20}, -inf);  // all -inf: 0
  infs[1][18] = inf;
  expect_like_argmax(infs, "infinities");
  at::Tensor nans = at::randn({2, 37});
  nans[0][30] = nan;
  nans[0][31] = 100.f;
  nans[1][3] = nan;
  nans[1][20] = nan;  // the first NaN: 3
  expect_like_argmax(nans, "NaN");
}

}  // namespace
}  // namespace nnsight
