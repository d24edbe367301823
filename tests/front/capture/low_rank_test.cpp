// The rank-k factorization capture compression stores: its error is the
// truncated-SVD optimum, checked against eigenvalues of the Gram matrix
// (a different decomposition), and it beats another rank-k approximation.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "front/capture/low_rank.h"

namespace nnsight::capture {
namespace {

TEST(CaptureLowRank, ErrorIsTheTailOfTheSpectrum) {
  at::manual_seed(4);
  for (int64_t k : {1, 3, 6}) {
    at::Tensor x = at::randn({12, 40}) + at::randn({12, 1}) * at::randn({1, 40}) * 3.0;  // [n, hidden]
    LowRank lr = truncated_svd(x, k);
    ASSERT_EQ(lr.coefficients.sizes(), (std::vector<int64_t>{12, k}));
    ASSERT_EQ(lr.basis.sizes(), (std::vector<int64_t>{k, 40}));
    const at::Tensor y = at::matmul(lr.coefficients, lr.basis);
    const double err2 = (x - y).to(at::kDouble).pow(2).sum().item<double>();
    at::Tensor xd = x.to(at::kDouble);
    at::Tensor eig = at::linalg_eigvalsh(at::matmul(xd, xd.t()));  // ascending, [n]
    const double tail = eig.narrow(0, 0, 12 - k).sum().item<double>();
    EXPECT_NEAR(err2, tail, 1e-4 * xd.pow(2).sum().item<double>()) << "k = " << k;
    // Any other rank-k approximation is no better: project onto k random directions.
    at::Tensor q = std::get<0>(at::linalg_qr(at::randn({40, k}).to(at::kDouble)));  // [hidden, k]
    const double other = (xd - at::matmul(at::matmul(xd, q), q.t())).pow(2).sum().item<double>();
    EXPECT_LE(err2, other * (1 + 1e-6));
  }
}

TEST(CaptureLowRank, RankAtLeastTheRowsIsExact) {
  at::manual_seed(5);
  at::Tensor x = at::randn({3, 16});
  LowRank lr = truncated_svd(x, 8);
  EXPECT_EQ(lr.coefficients.size(1), 3);
  EXPECT_LT((at::matmul(lr.coefficients, lr.basis) - x).abs().max().item<float>(), 1e-5);
}

}  // namespace
}  // namespace nnsight::capture
