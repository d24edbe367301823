// Plain tensor arithmetic with `using namespace nnsight;` and without
// <ATen/ATen.h> (include/nnsight/tensor_operators.hpp). This file is compiled
// without the precompiled header (tests/CMakeLists.txt), so ATen's own
// operators are not declared here -- the situation of a notebook cell or a
// program that includes only <nnsight/nnsight.hpp>. Results are compared with
// ATen's member functions.
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include <type_traits>

#include "support/tensor_values.h"

using namespace nnsight;

namespace {

#ifdef AT_FORALL_BINARY_OPS
#error "this test must be compiled without ATen/TensorOperators.h"
#endif

// Two tensors, or a tensor and a number, compute a tensor; a proxy records.
static_assert(std::is_same<decltype(std::declval<at::Tensor>() - std::declval<at::Tensor>()), at::Tensor>::value, "");
static_assert(std::is_same<decltype(std::declval<at::Tensor>() * 4.0), at::Tensor>::value, "");
static_assert(std::is_same<decltype(2 / std::declval<at::Tensor>()), at::Tensor>::value, "");
static_assert(std::is_same<decltype(std::declval<at::Tensor>() == std::declval<at::Tensor>()), at::Tensor>::value, "");
static_assert(std::is_same<decltype(std::declval<Proxy>() - std::declval<at::Tensor>()), Proxy>::value, "");
static_assert(std::is_same<decltype(std::declval<at::Tensor>() + std::declval<Proxy>()), Proxy>::value, "");
static_assert(std::is_same<decltype(std::declval<Proxy>() * 2), Proxy>::value, "");

at::Tensor values(std::initializer_list<float> v) { return nnsight::testing::float_tensor(v); }

TEST(TensorOperators, TwoTensorsCompute) {
  at::Tensor a = values({1.f, -2.f, 3.5f}), b = values({0.5f, 4.f, -1.f});
  EXPECT_TRUE((a + b).equal(a.add(b)));
  EXPECT_TRUE((a - b).equal(a.sub(b)));
  EXPECT_TRUE((a * b).equal(a.mul(b)));
  EXPECT_TRUE((a / b).equal(a.div(b)));
  EXPECT_TRUE((a < b).equal(a.lt(b)));
  EXPECT_TRUE((a >= b).equal(a.ge(b)));
  EXPECT_TRUE((a == a).all().item<bool>());
  EXPECT_FALSE((a != a).any().item<bool>());
}

TEST(TensorOperators, NumbersOnEitherSide) {
  at::Tensor a = values({1.f, -2.f, 4.f});
  EXPECT_TRUE((a * 4.0).equal(a.mul(4.0)));
  EXPECT_TRUE((a + 1).equal(a.add(1)));
  EXPECT_TRUE((3 - a).equal(a.neg().add(3)));  // 2, 5, -1
  EXPECT_TRUE((2.0 / a).equal(values({2.f, -1.f, 0.5f})));
  EXPECT_TRUE((0 < a).equal(a.gt(0)));
  EXPECT_TRUE((a > 0.5f).equal(a.gt(0.5)));
  EXPECT_EQ((2 * a).scalar_type(), at::kFloat);
  EXPECT_TRUE((a == true).equal(a.eq(1)));
}

}  // namespace
