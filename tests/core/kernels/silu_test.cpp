// kernels::silu / silu_mul: the same bits as at::silu (and at::silu(g) * u)
// where LibTorch vectorizes whole rows, within 2 ulp of a float64 reference
// on rows with tails, a row's values independent of the rows beside it, and
// LibTorch's result where the kernels fall back.
#include "core/kernels/silu.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/bitwise_equal.h"

namespace nnsight {
namespace {

using testing::bitwise_equal;

TEST(Silu, EqualsLibTorchOnWholeVectorRows) {
  c10::InferenceMode guard;
  at::manual_seed(3);
  for (int64_t rows : {1, 3, 40}) {
    at::Tensor g = at::randn({rows, 1536}) * 6, u = at::randn({rows, 1536});
    EXPECT_TRUE(bitwise_equal(kernels::silu(g), at::silu(g))) << rows << " rows";
    EXPECT_TRUE(bitwise_equal(kernels::silu_mul(g, u), at::silu(g) * u)) << rows << " rows";
  }
}

TEST(Silu, TailsMatchFloat64AndDoNotDependOnOtherRows) {
  c10::InferenceMode guard;
  at::manual_seed(4);
  for (int64_t n : {1, 15, 17, 37}) {
    at::Tensor g = at::randn({5, n}) * 6, u = at::randn({5, n});
    at::Tensor s = kernels::silu(g), su = kernels::silu_mul(g, u);
    at::Tensor gd = g.to(at::kDouble);
    at::Tensor ref = gd / (1.0 + at::exp(-gd));  // [5, n]
    const at::Tensor ulp =
        (at::nextafter(ref.to(at::kFloat).abs(), at::full({}, INFINITY)) - ref.to(at::kFloat).abs()).to(at::kDouble);
    EXPECT_TRUE(((s.to(at::kDouble) - ref).abs() <= 2 * ulp).all().item<bool>()) << "n = " << n;
    // silu_mul rounds silu first, then the product.
    EXPECT_TRUE(bitwise_equal(su, s * u)) << "n = " << n;
    for (int64_t r = 0; r < 5; ++r) {
      EXPECT_TRUE(bitwise_equal(kernels::silu(g.narrow(0, r, 1).clone()), s.narrow(0, r, 1))) << "n = " << n;
      EXPECT_TRUE(
          bitwise_equal(kernels::silu_mul(g.narrow(0, r, 1).clone(), u.narrow(0, r, 1).clone()), su.narrow(0, r, 1)))
          << "n = " << n;
    }
  }
}

TEST(Silu, FallsBackToLibTorchForOtherInputs) {
  c10::InferenceMode guard;
  at::Tensor b = at::randn({2, 64}).to(at::kBFloat16), bu = at::randn({2, 64}).to(at::kBFloat16);
  EXPECT_TRUE(bitwise_equal(kernels::silu(b), at::silu(b)));
  EXPECT_TRUE(bitwise_equal(kernels::silu_mul(b, bu), at::silu(b) * bu));
  at::Tensor strided = at::randn({4, 64}).narrow(1, 0, 32);  // not contiguous
  at::Tensor up = at::randn({4, 32});
  EXPECT_TRUE(bitwise_equal(kernels::silu_mul(strided, up), at::silu(strided) * up));
}

}  // namespace
}  // namespace nnsight
