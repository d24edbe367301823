// kernels::Int8Rows and packed_linear_rows: with a list of 8-bit rows set on
// the thread, the listed rows come out bitwise what packed_linear_q8 gives
// them and every other row bitwise what packed_linear gives it (so an exact
// row does not depend on its 8-bit companions); with no list, inside a
// Module::CallScope or under Int8RowsScope(nullptr), everything is
// packed_linear's; a list for another row count is refused. Where this CPU
// has no 8-bit kernels, every row stays packed_linear's.
#include "core/kernels/int8_rows.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_linear_q8.h"
#include "core/module.h"
#include "support/bitwise_equal.h"
#include "support/gguf_writer.h"

namespace nnsight {
namespace {

using kernels::Int8Rows;
using kernels::PackedMatrix;
using kernels::PackedType;
using testing::bitwise_equal;

struct Q80Matrix {
  std::vector<uint8_t> blocks;
  PackedMatrix w;
};

Q80Matrix q8_0_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  at::Tensor f = at::randn({rows, cols}, at::detail::createCPUGenerator(seed), at::kFloat) * 0.05;
  std::vector<float> v(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  Q80Matrix m{testing::quantize_q8_0(v), {}};
  m.w = kernels::make_packed_matrix(PackedType::Q8_0, rows, cols, m.blocks.data());
  return m;
}

at::Tensor rows_of(const at::Tensor& x, const std::vector<int64_t>& idx) {
  return x.index_select(0, at::tensor(idx, at::kLong));
}

TEST(Int8Rows, ListsTheFlaggedRowsAndTheOthers) {
  const Int8Rows mixed = Int8Rows::of({1, 0, 1, 1, 0});
  EXPECT_EQ(mixed.rows, 5);
  EXPECT_EQ(mixed.num_int8, 3);
  EXPECT_TRUE(at::equal(mixed.int8, at::tensor(std::vector<int64_t>{0, 2, 3}, at::kLong)));
  EXPECT_TRUE(at::equal(mixed.exact, at::tensor(std::vector<int64_t>{1, 4}, at::kLong)));
  const Int8Rows all = Int8Rows::of({1, 1}), none = Int8Rows::of({0, 0, 0});
  EXPECT_TRUE(all.all() && !all.none() && !all.int8.defined());
  EXPECT_TRUE(none.none() && !none.all() && !none.exact.defined());
}

TEST(Int8Rows, MixedRowsTakeTheirOwnKernelAndExactRowsStayBitwiseExact) {
  const Q80Matrix m = q8_0_matrix(70, 256, 1);
  at::Tensor bias = at::randn({70}, at::detail::createCPUGenerator(2), at::kFloat);
  at::Tensor x = at::randn({5, 256}, at::detail::createCPUGenerator(3), at::kFloat);  // [5, 256]
  const Int8Rows list = Int8Rows::of({1, 0, 1, 1, 0});
  at::Tensor y;
  {
    const kernels::Int8RowsScope scope(&list);
    ASSERT_EQ(kernels::current_int8_rows(), &list);
    y = kernels::packed_linear_rows(x, m.w, bias);  // [5, 70]
  }
  EXPECT_EQ(kernels::current_int8_rows(), nullptr);
  const at::Tensor exact = kernels::packed_linear(x, m.w, bias);
  EXPECT_TRUE(bitwise_equal(rows_of(y, {1, 4}), rows_of(exact, {1, 4})));
  if (!kernels::packed_q8_available(PackedType::Q8_0)) {
    EXPECT_TRUE(bitwise_equal(y, exact)) << "no 8-bit kernels here: every row exact";
    return;
  }
  const at::Tensor q8 = kernels::packed_linear_q8(rows_of(x, {0, 2, 3}), m.w, bias);
  EXPECT_TRUE(bitwise_equal(rows_of(y, {0, 2, 3}), q8));
  EXPECT_FALSE(bitwise_equal(rows_of(y, {0, 2, 3}), rows_of(exact, {0, 2, 3}))) << "the 8-bit rows were not 8-bit";
  EXPECT_LT((y - exact).abs().max().item<float>(), 0.05f * exact.abs().max().item<float>());
}

TEST(Int8Rows, ManyMatricesMixedEqualOneMatrixAtATime) {
  const Q80Matrix a = q8_0_matrix(48, 128, 4), b = q8_0_matrix(20, 128, 5);
  at::Tensor x = at::randn({4, 128}, at::detail::createCPUGenerator(6), at::kFloat);
  at::Tensor bias = at::randn({20}, at::detail::createCPUGenerator(7), at::kFloat);
  for (const std::vector<uint8_t>& flags :
       {std::vector<uint8_t>{0, 1, 1, 0}, std::vector<uint8_t>{1, 1, 1, 1}, std::vector<uint8_t>{0, 0, 0, 0}}) {
    const Int8Rows list = Int8Rows::of(flags);
    const kernels::Int8RowsScope scope(&list);
    const std::vector<at::Tensor> many = kernels::packed_linear_many_rows(x, {&a.w, &b.w}, {at::Tensor(), bias});
    ASSERT_EQ(many.size(), 2u);
    EXPECT_TRUE(bitwise_equal(many[0], kernels::packed_linear_rows(x, a.w, at::Tensor())));
    EXPECT_TRUE(bitwise_equal(many[1], kernels::packed_linear_rows(x, b.w, bias)));
    if (list.none()) {
      EXPECT_TRUE(bitwise_equal(many[1], kernels::packed_linear(x, b.w, bias)));
    }
  }
}

TEST(Int8Rows, ACallScopeOrAnEmptyScopeRunsEveryRowExact) {
  const Q80Matrix m = q8_0_matrix(16, 64, 8);
  at::Tensor x = at::randn({3, 64}, at::detail::createCPUGenerator(9), at::kFloat);
  const Int8Rows list = Int8Rows::of({1, 1, 1, 1, 1, 1});  // for 6 rows: x has 3
  const kernels::Int8RowsScope scope(&list);
  {
    const Module::CallScope graph_call;  // a graph's `call` on its own values
    EXPECT_EQ(kernels::current_int8_rows(), nullptr);
    EXPECT_TRUE(
        bitwise_equal(kernels::packed_linear_rows(x, m.w, at::Tensor()), kernels::packed_linear(x, m.w, at::Tensor())));
  }
  {
    const kernels::Int8RowsScope experts(nullptr);  // sparse_moe's routed experts
    EXPECT_TRUE(
        bitwise_equal(kernels::packed_linear_rows(x, m.w, at::Tensor()), kernels::packed_linear(x, m.w, at::Tensor())));
  }
  EXPECT_EQ(kernels::current_int8_rows(), &list);
  if (!kernels::packed_q8_available(PackedType::Q8_0)) return;  // no 8-bit kernels: the list is never read
  try {
    kernels::packed_linear_rows(x, m.w, at::Tensor());
    ADD_FAILURE() << "a list for 6 rows was applied to 3";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("set for 6 rows"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nnsight
