// kernels::dot_rows / axpy_rows / exp_shifted_sum against plain float64
// sums, for row lengths and row counts around the vector widths, and their
// independence from the other rows.
#include "core/kernels/row_ops.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace nnsight {
namespace {

using kernels::RowType;

struct Rows {
  at::Tensor data;  // [n, d] float32 or bfloat16
  std::vector<const void*> ptrs;
};

Rows make_rows(int64_t n, int64_t d, at::ScalarType dt) {
  Rows r{at::randn({n, d}).to(dt), {}};
  const int64_t elem = static_cast<int64_t>(r.data.element_size());
  for (int64_t j = 0; j < n; ++j) r.ptrs.push_back(static_cast<const char*>(r.data.data_ptr()) + j * d * elem);
  return r;
}

TEST(RowOps, DotAndAxpyMatchFloat64) {
  at::manual_seed(1);
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    const RowType type = dt == at::kFloat ? RowType::F32 : RowType::BF16;
    for (int64_t d : {1, 7, 8, 9, 15, 16, 17, 31, 64, 100}) {
      const int64_t n = 37;  // two tiles of 16 rows, one of 4, one alone
      Rows rows = make_rows(n, d, dt);
      at::Tensor rd = rows.data.to(at::kDouble);  // [n, d]
      at::Tensor q = at::randn({d});
      std::vector<float> out(static_cast<size_t>(n));
      kernels::dot_rows(q.data_ptr<float>(), rows.ptrs.data(), type, n, d, out.data());
      at::Tensor want = at::mv(rd, q.to(at::kDouble));             // [n]
      at::Tensor mag = at::mv(rd.abs(), q.to(at::kDouble).abs());  // error scale
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_LE(std::abs(out[static_cast<size_t>(j)] - want[j].item<double>()),
                  mag[j].item<double>() * (static_cast<double>(d) / 8 + 4) * std::ldexp(1.0, -24) + 1e-7)
            << c10::toString(dt) << " d=" << d << " row " << j;
      }
      at::Tensor w = at::randn({n});
      at::Tensor acc0 = at::randn({d});
      at::Tensor acc = acc0.clone();
      kernels::axpy_rows(w.data_ptr<float>(), rows.ptrs.data(), type, n, d, acc.data_ptr<float>());
      at::Tensor want_acc = acc0.to(at::kDouble) + at::mv(rd.t(), w.to(at::kDouble));
      at::Tensor mag_acc = acc0.to(at::kDouble).abs() + at::mv(rd.t().abs(), w.to(at::kDouble).abs());
      EXPECT_TRUE(((acc.to(at::kDouble) - want_acc).abs() <= mag_acc * (n + 1) * std::ldexp(1.0, -23) + 1e-7)
                      .all()
                      .item<bool>())
          << c10::toString(dt) << " d=" << d;
    }
  }
}

TEST(RowOps, EachDotIndependentOfTheOtherRows) {
  at::manual_seed(2);
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    const RowType type = dt == at::kFloat ? RowType::F32 : RowType::BF16;
    const int64_t n = 37, d = 70;
    Rows rows = make_rows(n, d, dt);
    at::Tensor q = at::randn({d});
    std::vector<float> all(static_cast<size_t>(n));
    kernels::dot_rows(q.data_ptr<float>(), rows.ptrs.data(), type, n, d, all.data());
    for (int64_t j = 0; j < n; ++j) {
      float one = 0.f;
      kernels::dot_rows(q.data_ptr<float>(), &rows.ptrs[static_cast<size_t>(j)], type, 1, d, &one);
      EXPECT_EQ(std::memcmp(&one, &all[static_cast<size_t>(j)], sizeof one), 0) << c10::toString(dt) << " row " << j;
    }
  }
}

TEST(RowOps, ExpShiftedSumMatchesFloat64) {
  at::manual_seed(3);
  for (int64_t n : {1, 5, 16, 17, 100}) {
    at::Tensor s = at::randn({n}) * 8;
    at::Tensor sd = s.to(at::kDouble);
    at::Tensor want = at::exp(sd - sd.max());  // [n]
    std::vector<float> got(s.data_ptr<float>(), s.data_ptr<float>() + n);
    float max = 0.f;
    const float sum = kernels::exp_shifted_sum(got.data(), n, &max);
    EXPECT_EQ(max, s.max().item<float>()) << "n=" << n;
    for (int64_t j = 0; j < n; ++j) {
      // The float subtraction rounds by up to half an ulp of s - max, which
      // exp turns into a relative error; then a few ulp of exp itself.
      const double shift = std::abs(sd[j].item<double>() - sd.max().item<double>());
      EXPECT_LE(std::abs(got[static_cast<size_t>(j)] - want[j].item<double>()),
                (shift * std::ldexp(1.0, -24) + 4 * std::ldexp(1.0, -24)) * want[j].item<double>())
          << "n=" << n << " j=" << j;
    }
    EXPECT_NEAR(sum, want.sum().item<double>(), 1e-6 * want.sum().item<double>()) << "n=" << n;
    // The largest score's numerator is exactly 1.
    EXPECT_EQ(got[static_cast<size_t>(sd.argmax().item<int64_t>())], 1.f) << "n=" << n;
  }
}

}  // namespace
}  // namespace nnsight
