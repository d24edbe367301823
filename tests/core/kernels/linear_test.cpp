// kernels::linear: results against a float64 reference and against
// at::linear, bitwise batch invariance on every instruction-set path, and the
// fallbacks to at::linear.
#include "core/kernels/linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/bitwise_equal.h"

namespace nnsight {
namespace {

using kernels::LinearPath;

const std::vector<LinearPath> kAllPaths = {LinearPath::Scalar, LinearPath::Avx2, LinearPath::Avx512};

std::vector<LinearPath> paths_for(at::ScalarType dt) {
  std::vector<LinearPath> out;
  for (LinearPath p : kAllPaths)
    if (kernels::linear_path_available(p, dt)) out.push_back(p);
  return out;
}

std::string describe(LinearPath p, at::ScalarType dt, int64_t m, int64_t k, int64_t n, bool bias) {
  return std::string(kernels::linear_path_name(p)) + " " + c10::toString(dt) + " M=" + std::to_string(m) +
         " K=" + std::to_string(k) + " N=" + std::to_string(n) + (bias ? " bias" : " no bias");
}

// Restores the intra-op thread count a test changes.
struct ThreadCountGuard {
  int saved = at::get_num_threads();
  ~ThreadCountGuard() { at::set_num_threads(saved); }
};

using testing::bitwise_equal;

// Plain float64 sums: y = x w^T + bias, from the same (rounded) inputs.
at::Tensor reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
  const int64_t M = xd.size(0), N = wd.size(0), K = wd.size(1);
  at::Tensor y = at::zeros({M, N}, at::kDouble);
  auto xa = xd.accessor<double, 2>();
  auto wa = wd.accessor<double, 2>();
  auto ya = y.accessor<double, 2>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += xa[m][k] * wa[n][k];
      ya[m][n] = s;
    }
  if (bias.defined()) y += bias.to(at::kDouble);
  return y;
}

// sum_k |x[m,k] w[n,k]| (+ |bias[n]|): the scale of the rounding error of y[m, n].
at::Tensor magnitude(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  at::Tensor mag = at::matmul(x.to(at::kDouble).abs(), w.to(at::kDouble).abs().t());
  if (bias.defined()) mag += bias.to(at::kDouble).abs();
  return mag;
}

struct Shape {
  int64_t m, k, n;
};

TEST(LinearKernel, DefaultPathIsTheWidestAvailable) {
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    EXPECT_TRUE(kernels::linear_path_available(LinearPath::Scalar, dt));
    const LinearPath d = kernels::linear_default_path(dt);
    EXPECT_TRUE(kernels::linear_path_available(d, dt));
    if (kernels::linear_path_available(LinearPath::Avx512, dt)) {
      EXPECT_EQ(d, LinearPath::Avx512);
    }
  }
  EXPECT_FALSE(kernels::linear_path_available(LinearPath::Scalar, at::kDouble));
}

TEST(LinearKernel, MatchesFloat64ReferenceOnEveryPath) {
  // K around the vector widths (8, 16, 32) and not a multiple of them; odd N.
  const std::vector<Shape> shapes = {{1, 1, 1},    {1, 5, 3},     {2, 16, 7},   {3, 17, 9},   {7, 31, 25},
                                     {16, 32, 24}, {33, 33, 49},  {1, 64, 97},  {8, 579, 50}, {5, 1000, 13},
                                     {9, 48, 31},  {512, 40, 11}, {4, 1536, 6}, {13, 7, 200}};
  at::manual_seed(1);
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    for (LinearPath p : paths_for(dt)) {
      for (const Shape& s : shapes) {
        for (bool with_bias : {false, true}) {
          at::Tensor x = at::randn({s.m, s.k}).to(dt), w = at::randn({s.n, s.k}).to(dt);
          at::Tensor b = with_bias ? at::randn({s.n}).to(dt) : at::Tensor();
          at::Tensor y = kernels::linear_on_path(p, x, w, b);
          ASSERT_EQ(y.scalar_type(), dt);
          ASSERT_EQ(y.sizes(), (std::vector<int64_t>{s.m, s.n}));
          at::Tensor ref = reference(x, w, b);
          at::Tensor err = (y.to(at::kDouble) - ref).abs();
          // float32 sums: at most K/8 + 4 roundings of 2^-24 each (the longest
          // chain of additions on any path) relative to the magnitude of the
          // terms; a bfloat16 output adds its own rounding, 2^-8 of the value.
          at::Tensor tol = magnitude(x, w, b) * (static_cast<double>(s.k) / 8 + 4) * std::ldexp(1.0, -24) + 1e-6;
          if (dt == at::kBFloat16) tol += ref.abs() * std::ldexp(1.0, -8) * 1.01;
          EXPECT_TRUE((err <= tol).all().item<bool>())
              << describe(p, dt, s.m, s.k, s.n, with_bias) << ": max error " << err.max().item<double>();
        }
      }
    }
  }
}

TEST(LinearKernel, CloseToAtLinear) {
  at::manual_seed(2);
  const std::vector<Shape> shapes = {{1, 576, 192}, {8, 576, 576}, {33, 1536, 71}, {64, 100, 1536}};
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    for (const Shape& s : shapes) {
      at::Tensor x = at::randn({s.m, s.k}).to(dt), w = (at::randn({s.n, s.k}) * 0.05).to(dt);
      at::Tensor b = at::randn({s.n}).to(dt);
      at::Tensor got = kernels::linear(x, w, b).to(at::kFloat);
      at::Tensor want = at::linear(x, w, b).to(at::kFloat);
      // at::linear rounds bfloat16 the same way but may sum in another order.
      const double tol = dt == at::kFloat ? 1e-4 : 2e-2 * std::max(1.0, want.abs().max().item<double>());
      EXPECT_LE((got - want).abs().max().item<double>(), tol)
          << describe(kernels::linear_default_path(dt), dt, s.m, s.k, s.n, true);
    }
  }
}

// Every row computed within a batch equals the same row computed alone, for
// every M (so every tile height and row-tile split), with other rows holding
// anything (even inf and NaN), and for any thread count.
TEST(LinearKernel, BitwiseBatchInvariantOnEveryPath) {
  ThreadCountGuard guard;
  at::manual_seed(3);
  // K=579: not a multiple of any vector width; N=250: several L2 blocks of w
  // when M exceeds one row tile, and a partial tile at the end.
  const std::vector<std::pair<int64_t, int64_t>> kn = {{579, 250}, {64, 97}, {1536, 30}};
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    for (LinearPath p : paths_for(dt)) {
      for (auto [K, N] : kn) {
        for (bool with_bias : {false, true}) {
          const int64_t M = 37;
          at::Tensor x = at::randn({M, K}).to(dt), w = at::randn({N, K}).to(dt);
          at::Tensor b = with_bias ? at::randn({N}).to(dt) : at::Tensor();
          at::set_num_threads(guard.saved);
          // Rows computed alone: the reference every batch must reproduce bit for bit.
          std::vector<at::Tensor> alone;
          for (int64_t m = 0; m < M; ++m) alone.push_back(kernels::linear_on_path(p, x.narrow(0, m, 1), w, b));
          // Not vacuous: rows differ from each other.
          ASSERT_FALSE(bitwise_equal(alone[0], alone[1]));
          const std::string what = describe(p, dt, M, K, N, with_bias);
          for (int threads : {1, 2}) {
            at::set_num_threads(threads);
            // Windows of every height 1..M at shifting offsets.
            for (int64_t len = 1; len <= M; ++len) {
              const int64_t start = (len * 7) % (M - len + 1);
              at::Tensor y = kernels::linear_on_path(p, x.narrow(0, start, len), w, b);
              for (int64_t i = 0; i < len; ++i)
                ASSERT_TRUE(bitwise_equal(y.narrow(0, i, 1), alone[static_cast<size_t>(start + i)]))
                    << what << " threads=" << threads << " rows [" << start << ", " << start + len << ") row " << i;
            }
          }
          // Other rows hold garbage: row 5 and 20 are unaffected.
          at::Tensor noisy = at::randn({M, K}).to(dt) * 1000;
          noisy[3].fill_(std::numeric_limits<float>::infinity());
          noisy[4].fill_(std::numeric_limits<float>::quiet_NaN());
          noisy[5].copy_(x[5]);
          noisy[20].copy_(x[20]);
          at::Tensor y = kernels::linear_on_path(p, noisy, w, b);
          EXPECT_TRUE(bitwise_equal(y.narrow(0, 5, 1), alone[5])) << what << " noisy batch row 5";
          EXPECT_TRUE(bitwise_equal(y.narrow(0, 20, 1), alone[20])) << what << " noisy batch row 20";
        }
      }
    }
  }
}

// A column computed with a w of N rows equals it computed from a w holding
// only a slice of those rows: the reduction does not depend on N either (a
// tensor-parallel shard of w gives the same values as the whole).
TEST(LinearKernel, BitwiseIndependentOfOtherWeightRows) {
  at::manual_seed(4);
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    for (LinearPath p : paths_for(dt)) {
      at::Tensor x = at::randn({9, 200}).to(dt), w = at::randn({101, 200}).to(dt);
      at::Tensor whole = kernels::linear_on_path(p, x, w, at::Tensor());
      for (auto [start, len] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {17, 5}, {50, 51}, {100, 1}}) {
        at::Tensor part = kernels::linear_on_path(p, x, w.narrow(0, start, len).contiguous(), at::Tensor());
        EXPECT_TRUE(bitwise_equal(part, whole.narrow(1, start, len).contiguous()))
            << kernels::linear_path_name(p) << " " << c10::toString(dt) << " rows " << start << "+" << len;
      }
    }
  }
}

TEST(LinearKernel, LeadingDimensionsAndEmptyShapes) {
  at::manual_seed(5);
  at::Tensor w = at::randn({6, 10}), b = at::randn({6});
  at::Tensor x3 = at::randn({2, 3, 10});
  at::Tensor y3 = kernels::linear(x3, w, b);
  ASSERT_EQ(y3.sizes(), (std::vector<int64_t>{2, 3, 6}));
  EXPECT_TRUE(bitwise_equal(y3.reshape({6, 6}), kernels::linear(x3.reshape({6, 10}), w, b)));
  at::Tensor x1 = at::randn({10});
  at::Tensor y1 = kernels::linear(x1, w, b);
  ASSERT_EQ(y1.sizes(), (std::vector<int64_t>{6}));
  EXPECT_LE((y1 - at::linear(x1, w, b)).abs().max().item<double>(), 1e-5);
  // Non-contiguous x is read through a copy.
  at::Tensor xt = at::randn({10, 4}).t();
  EXPECT_LE((kernels::linear(xt, w, b) - at::linear(xt, w, b)).abs().max().item<double>(), 1e-5);
  // No rows, no columns, K = 0 (the sum is empty: bias alone).
  EXPECT_EQ(kernels::linear(at::randn({0, 10}), w, b).sizes(), (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(kernels::linear(at::randn({3, 10}), at::randn({0, 10}), at::Tensor()).sizes(),
            (std::vector<int64_t>{3, 0}));
  at::Tensor y0 = kernels::linear(at::randn({3, 0}), at::randn({6, 0}), b);
  EXPECT_TRUE(at::equal(y0, b.expand({3, 6})));
}

TEST(LinearKernel, FallsBackToAtLinear) {
  at::manual_seed(6);
  at::Tensor x = at::randn({4, 12}), w = at::randn({5, 12}), b = at::randn({5});
  EXPECT_TRUE(kernels::linear_uses_kernel(x, w, b));
  // float64: at::linear itself.
  at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble), bd = b.to(at::kDouble);
  EXPECT_FALSE(kernels::linear_uses_kernel(xd, wd, bd));
  EXPECT_TRUE(bitwise_equal(kernels::linear(xd, wd, bd), at::linear(xd, wd, bd)));
  // Mixed dtypes and a non-contiguous w.
  EXPECT_FALSE(kernels::linear_uses_kernel(x, w.to(at::kBFloat16), at::Tensor()));
  at::Tensor wt = at::randn({12, 5}).t();
  EXPECT_FALSE(kernels::linear_uses_kernel(x, wt, b));
  EXPECT_TRUE(bitwise_equal(kernels::linear(x, wt, b), at::linear(x, wt, b)));
  // Autograd: gradients flow through the fallback.
  at::Tensor wg = w.clone().requires_grad_(true);
  EXPECT_FALSE(kernels::linear_uses_kernel(x, wg, b));
  kernels::linear(x, wg, b).sum().backward();
  ASSERT_TRUE(wg.grad().defined());
  EXPECT_LE((wg.grad() - x.sum(0).expand({5, 12})).abs().max().item<double>(), 1e-5);
  // linear_on_path refuses what the kernel does not take.
  EXPECT_THROW(kernels::linear_on_path(LinearPath::Scalar, xd, wd, bd), c10::Error);
}

}  // namespace
}  // namespace nnsight
