// kernels::rms_norm against a plain double-precision reference written here,
// its rows' independence from the batch, and kernels::add_rms_norm: the same
// bits as kernels::add then rms_norm, and the two calls where it falls back.
#include "core/kernels/rms_norm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/kernels/add.h"
#include "support/bitwise_equal.h"

namespace nnsight {
namespace {

// y = w * x / sqrt(mean(x^2) + eps), each row in double.
at::Tensor reference(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
  at::Tensor out = at::empty_like(xd);
  for (int64_t r = 0; r < xd.size(0); ++r) {
    double ss = 0;
    for (int64_t i = 0; i < xd.size(1); ++i) ss += xd[r][i].item<double>() * xd[r][i].item<double>();
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(xd.size(1)) + eps);
    out[r] = wd * xd[r] * inv;
  }
  return out;
}

TEST(RmsNorm, EqualsPlainReference) {
  c10::InferenceMode guard;
  at::manual_seed(3);
  for (int64_t n : {1, 7, 16, 33, 576}) {
    at::Tensor x = at::randn({3, n}) * 4, w = at::randn({n});
    at::Tensor got = kernels::rms_norm(x, w, 1e-5);
    EXPECT_TRUE(at::allclose(got.to(at::kDouble), reference(x, w, 1e-5), 1e-6, 1e-6)) << "n = " << n;
  }
}

TEST(RmsNorm, RowDoesNotDependOnTheBatch) {
  c10::InferenceMode guard;
  at::manual_seed(4);
  at::Tensor x = at::randn({9, 576}) * 10, w = at::randn({576});
  at::Tensor all = kernels::rms_norm(x, w, 1e-6);
  for (int64_t r : {0, 4, 8}) {
    EXPECT_TRUE(testing::bitwise_equal(kernels::rms_norm(x.narrow(0, r, 1), w, 1e-6), all.narrow(0, r, 1)))
        << "row " << r;
  }
}

TEST(AddRmsNorm, SameBitsAsAddThenNorm) {
  c10::InferenceMode guard;
  at::manual_seed(5);
  for (int64_t rows : {1, 5, 40}) {
    for (int64_t n : {3, 64, 577}) {
      at::Tensor a = at::randn({rows, n}) * 100, b = at::randn({rows, n}), w = at::randn({n});
      auto [sum, normed] = kernels::add_rms_norm(a, b, w, 1e-6);
      at::Tensor want_sum = kernels::add(a, b);
      EXPECT_TRUE(testing::bitwise_equal(sum, want_sum)) << rows << " x " << n;
      EXPECT_TRUE(testing::bitwise_equal(normed, kernels::rms_norm(want_sum, w, 1e-6))) << rows << " x " << n;
      EXPECT_NE(sum.data_ptr(), a.data_ptr());  // the inputs stay as they were
    }
  }
}

TEST(AddRmsNorm, FallsBackToTheTwoCalls) {
  c10::InferenceMode guard;
  at::manual_seed(6);
  at::Tensor a = at::randn({4, 32}).to(at::kBFloat16), b = at::randn({4, 32}).to(at::kBFloat16);
  at::Tensor w = at::randn({32}).to(at::kBFloat16);
  auto [sum, normed] = kernels::add_rms_norm(a, b, w, 1e-6);
  EXPECT_TRUE(testing::bitwise_equal(sum, a + b));
  EXPECT_TRUE(testing::bitwise_equal(normed, kernels::rms_norm(a + b, w, 1e-6)));
  // A non-contiguous residual: the same values as with a contiguous copy.
  at::Tensor wide = at::randn({4, 64});
  at::Tensor strided = wide.narrow(1, 0, 32), delta = at::randn({4, 32}), wf = at::randn({32});
  auto [s2, n2] = kernels::add_rms_norm(strided, delta, wf, 1e-6);
  EXPECT_TRUE(testing::bitwise_equal(s2, strided.contiguous() + delta));
  EXPECT_TRUE(testing::bitwise_equal(n2, kernels::rms_norm(strided.contiguous() + delta, wf, 1e-6)));
}

}  // namespace
}  // namespace nnsight
