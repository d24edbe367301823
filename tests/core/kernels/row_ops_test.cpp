// kernels::dot_rows / axpy_rows against plain float64 sums, for row lengths
// around the vector widths, and their independence from the other rows.
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
      const int64_t n = 13;
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
  const int64_t n = 9, d = 70;
  Rows rows = make_rows(n, d, at::kFloat);
  at::Tensor q = at::randn({d});
  std::vector<float> all(static_cast<size_t>(n));
  kernels::dot_rows(q.data_ptr<float>(), rows.ptrs.data(), RowType::F32, n, d, all.data());
  for (int64_t j = 0; j < n; ++j) {
    float one = 0.f;
    kernels::dot_rows(q.data_ptr<float>(), &rows.ptrs[static_cast<size_t>(j)], RowType::F32, 1, d, &one);
    EXPECT_EQ(std::memcmp(&one, &all[static_cast<size_t>(j)], sizeof one), 0) << "row " << j;
  }
}

}  // namespace
}  // namespace nnsight
