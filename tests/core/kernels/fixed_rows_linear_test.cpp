// Batch-invariant device matmuls (core/kernels/fixed_rows_linear.h): the
// chunked GEMM equals at::linear within rounding, a row's value is the same
// bits whatever rows are beside it (checked on the CPU's BLAS here; on a GPU,
// CudaGraphs.ARequestsTokensDoNotDependOnItsCompanions), kernels::linear takes
// it on the device path only when asked, and a bad NNSIGHT_FIXED_ROWS is a
// precise error.
#include "core/kernels/fixed_rows_linear.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <nnsight/error.hpp>

#include "core/kernels/kernel_path.h"
#include "core/kernels/linear.h"
#include "support/gpu_available.h"

namespace nnsight {
namespace {

TEST(FixedRowsLinear, EqualsAtLinearWithinRounding) {
  at::manual_seed(3);
  const at::Tensor w = at::randn({16, 24}), b = at::randn({16});
  for (int64_t m : {1, 7, 8, 9, 37}) {
    const at::Tensor x = at::randn({m, 24});
    const at::Tensor got = kernels::fixed_rows_linear(x, w, b, 8);
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{m, 16}));
    EXPECT_TRUE(at::allclose(got, at::linear(x, w, b), 1e-5, 1e-5)) << m << " rows";
  }
  // Leading dimensions are kept; no bias.
  const at::Tensor x3 = at::randn({2, 5, 24});
  const at::Tensor got = kernels::fixed_rows_linear(x3, w, at::Tensor(), 4);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 5, 16}));
  EXPECT_TRUE(at::allclose(got, at::linear(x3, w), 1e-5, 1e-5));
}

// One row's value alone, third of 9 rows and 101st of 130 (three chunks of
// 64, the last padded): the same GEMM shape each time, so the same bits. 64
// rows: a multiple of every BLAS micro-kernel's row block, so no row takes
// an edge kernel of its own.
TEST(FixedRowsLinear, ARowsValueIsTheSameBitsWhateverRowsAreBesideIt) {
  at::manual_seed(5);
  const at::Tensor w = at::randn({96, 200}), b = at::randn({96});
  const at::Tensor row = at::randn({1, 200});
  const at::Tensor alone = kernels::fixed_rows_linear(row, w, b, 64);
  at::Tensor nine = at::randn({9, 200});
  nine[2].copy_(row[0]);
  at::Tensor many = at::randn({130, 200});
  many[100].copy_(row[0]);
  EXPECT_TRUE(at::equal(kernels::fixed_rows_linear(nine, w, b, 64)[2], alone[0]));
  EXPECT_TRUE(at::equal(kernels::fixed_rows_linear(many, w, b, 64)[100], alone[0]));
}

// kernels::linear: on the device path (forced on the CPU) with fixed rows
// set, the chunked GEMM; without them, or on the CPU kernels' path, not.
TEST(FixedRowsLinear, KernelsLinearTakesItOnTheDevicePathWhenAsked) {
  at::manual_seed(7);
  const at::Tensor w = at::randn({32, 48}), b = at::randn({32}), x = at::randn({5, 48});
  const at::Tensor chunked = kernels::fixed_rows_linear(x, w, b, 16);
  {
    kernels::ForceDevicePath device;
    kernels::UseFixedRows fixed(16);
    EXPECT_EQ(kernels::fixed_rows(), 16);
    EXPECT_TRUE(at::equal(kernels::linear(x, w, b), chunked));
    // Under autograd, at::linear's graph instead: gradients still flow.
    const at::Tensor xg = x.clone().requires_grad_(true);
    kernels::linear(xg, w, b).sum().backward();
    ASSERT_TRUE(xg.grad().defined());
    EXPECT_TRUE(at::allclose(xg.grad(), w.sum(0).expand({5, 48})));
  }
  {
    kernels::ForceDevicePath device;
    kernels::UseFixedRows off(0);
    EXPECT_TRUE(at::allclose(kernels::linear(x, w, b), at::linear(x, w, b), 0, 0));
  }
  kernels::UseFixedRows fixed(16);
  EXPECT_TRUE(
      at::equal(kernels::linear(x, w, b), kernels::linear_on_path(kernels::linear_default_path(at::kFloat), x, w, b)))
      << "the CPU kernels' path keeps its own (invariant) kernel";
}

TEST(FixedRowsLinear, ABadEnvironmentValueIsAPreciseError) {
  // The environment is read when nothing has set the rows yet: an unset
  // scope brings that state back (UseFixedRows restores what it found).
  const char* before = std::getenv("NNSIGHT_FIXED_ROWS");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("NNSIGHT_FIXED_ROWS", "lots", 1);
  EXPECT_NO_THROW(kernels::UseFixedRows(8));  // a set value never reads the environment
  try {
    kernels::fixed_rows_reread_environment();
    FAIL() << "no error for NNSIGHT_FIXED_ROWS=lots";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("NNSIGHT_FIXED_ROWS='lots': expected a whole number of rows from 1 to 4096"),
              std::string::npos)
        << e.what();
  }
  ::setenv("NNSIGHT_FIXED_ROWS", "64", 1);
  EXPECT_EQ(kernels::fixed_rows_reread_environment(), 64);
  if (before != nullptr)
    ::setenv("NNSIGHT_FIXED_ROWS", saved.c_str(), 1);
  else
    ::unsetenv("NNSIGHT_FIXED_ROWS");
  kernels::fixed_rows_reread_environment();
}

// On a GPU, at Llama-3-8B's projection shapes in bf16: one row's value
// alone and among 9, 64 and 200 rows. cuBLAS's own choice of kernels is
// printed (whether it needs fixed rows at all); with fixed rows of 128 the
// bits must be the same.
TEST(FixedRowsLinear, OnAGpuARowsBitsDoNotDependOnItsCompanions) {
  if (auto why = testing::why_no_gpu(); !why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  at::manual_seed(11);
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {14336, 4096}, {4096, 14336}}) {
    const at::Tensor w = at::randn({n, k}, opts) * 0.02, row = at::randn({1, k}, opts);
    for (int64_t fixed : {int64_t{0}, int64_t{128}}) {
      const auto run = [&](const at::Tensor& x) {
        return fixed > 0 ? kernels::fixed_rows_linear(x, w, at::Tensor(), fixed) : at::linear(x, w);
      };
      const at::Tensor alone = run(row)[0];
      bool all_equal = true;
      double worst = 0;
      for (int64_t m : {9, 64, 200}) {
        at::Tensor many = at::randn({m, k}, opts);
        many[m / 2].copy_(row[0]);
        const at::Tensor got = run(many)[m / 2];
        all_equal = all_equal && at::equal(got, alone);
        worst = std::max(worst, (got.to(at::kFloat) - alone.to(at::kFloat)).abs().max().item<double>());
      }
      std::printf(
          "batch invariance of a [rows, %lld] x [%lld, %lld] bf16 GEMM (%s): a row alone vs among 9, 64, "
          "200: %s (max difference %g)\n",
          static_cast<long long>(k), static_cast<long long>(k), static_cast<long long>(n),
          fixed > 0 ? "fixed rows 128" : "cuBLAS's choice", all_equal ? "bitwise equal" : "differ", worst);
      if (fixed > 0) {
        EXPECT_TRUE(all_equal) << n << " x " << k;
      }
    }
  }
}

}  // namespace
}  // namespace nnsight
