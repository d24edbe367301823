// kernels::add: the same bits as at::add for same-shape float32 tensors, and
// at::add's result (broadcasting, dtype) where it falls back.
#include "core/kernels/add.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace nnsight {
namespace {

TEST(Add, EqualsLibTorch) {
  c10::InferenceMode guard;
  at::manual_seed(6);
  for (int64_t n : {1, 17, 576, 70000}) {
    at::Tensor a = at::randn({2, n}) * 1e3, b = at::randn({2, n}) * 1e-3;
    at::Tensor got = kernels::add(a, b);
    EXPECT_TRUE(at::equal(got, a + b)) << "n = " << n;
    EXPECT_NE(got.data_ptr(), a.data_ptr());  // a fresh tensor: the inputs stay
  }
  at::Tensor a = at::randn({3, 8}), row = at::randn({8});
  EXPECT_TRUE(at::equal(kernels::add(a, row), a + row));  // broadcast: at::add
  at::Tensor ab = a.to(at::kBFloat16), bb = at::randn({3, 8}).to(at::kBFloat16);
  EXPECT_TRUE(at::equal(kernels::add(ab, bb), ab + bb));
}

}  // namespace
}  // namespace nnsight
