// kernels::linear_input_grad and packed_linear_input_grad (the backward of
// the recorded linear kernels) against a float64 matmul of the (decoded)
// weights, on both sides of the row count where BLAS takes over.
#include "core/kernels/linear_input_grad.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/kernels/packed_matrix.h"

namespace nnsight {
namespace {

using kernels::PackedMatrix;
using kernels::PackedType;

void expect_close(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LT((got.to(at::kDouble) - want).abs().max().item<double>() / scale, 1e-5);
}

void put_half(uint8_t* p, float v) {
  at::Tensor h = at::full({1}, v, at::kFloat).to(at::kHalf);
  std::memcpy(p, h.data_ptr(), 2);
}

// Random blocks with finite f16 scales (weights of order 0.1): Q8_0, Q4_1 or Q6_K.
PackedMatrix random_matrix(PackedType type, int64_t rows, int64_t cols, uint32_t seed) {
  const auto& t = kernels::packed_traits(type);
  const int64_t nblocks = rows * cols / t.block_size;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  std::vector<uint8_t> data(static_cast<size_t>(nblocks * t.block_bytes));
  for (auto& b : data) b = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < nblocks; ++i) {
    uint8_t* b = data.data() + i * t.block_bytes;
    if (type == PackedType::Q8_0) put_half(b, scale(rng));
    if (type == PackedType::Q4_1) {
      put_half(b, scale(rng));
      put_half(b + 2, -8.f * scale(rng));
    }
    if (type == PackedType::Q6_K) put_half(b + 208, scale(rng) / 16.f);
  }
  return kernels::make_packed_matrix(type, rows, cols, data.data());
}

TEST(LinearInputGrad, FloatWeightsMatchMatmul) {
  at::manual_seed(1);
  const at::Tensor w = at::randn({48, 200});  // [N, K]: 200 is not a multiple of the 64-column slices
  for (int64_t m : {1, 10, 32, 40}) {
    const at::Tensor g = at::randn({m, 48});
    expect_close(kernels::linear_input_grad(g, w), at::matmul(g.to(at::kDouble), w.to(at::kDouble)));
  }
  // Leading dimensions are kept, and bfloat16 weights are read as they are.
  const at::Tensor g3 = at::randn({2, 5, 48});
  expect_close(kernels::linear_input_grad(g3, w), at::matmul(g3.to(at::kDouble), w.to(at::kDouble)));
  const at::Tensor wb = w.to(at::kBFloat16);
  const at::Tensor dxb = kernels::linear_input_grad(g3, wb);
  EXPECT_EQ(dxb.scalar_type(), at::kFloat);
  expect_close(dxb, at::matmul(g3.to(at::kDouble), wb.to(at::kDouble)));
}

TEST(LinearInputGrad, ReadsOnlyTheRowsTheGradientReaches) {
  // A logit difference reaches two rows of the LM head: the others are not
  // read (NaN there would poison a dense product).
  at::manual_seed(2);
  at::Tensor w = at::full({300, 64}, std::numeric_limits<float>::quiet_NaN());
  w[7] = at::randn({64});
  w[250] = at::randn({64});
  at::Tensor g = at::zeros({3, 300});
  g.select(1, 7).fill_(1.f);
  g.select(1, 250).fill_(-1.f);
  const at::Tensor want = (w[7] - w[250]).to(at::kDouble).expand({3, 64});
  expect_close(kernels::linear_input_grad(g, w), want);
}

TEST(LinearInputGrad, PackedWeightsMatchTheDecodedMatmul) {
  for (PackedType type : {PackedType::Q8_0, PackedType::Q4_1, PackedType::Q6_K}) {
    SCOPED_TRACE(kernels::packed_traits(type).name);
    // 608 = 9 slices of 64 and one of 32; Q6_K: 2 slices of 256.
    const int64_t cols = kernels::packed_traits(type).block_size == 32 ? 608 : 512;
    const PackedMatrix w = random_matrix(type, 40, cols, 5);
    const at::Tensor wd = w.dequantize().to(at::kDouble);
    for (int64_t m : {1, 10, 40}) {  // 40: the BLAS path
      at::manual_seed(m);
      const at::Tensor g = at::randn({m, 40});
      expect_close(kernels::packed_linear_input_grad(g, w), at::matmul(g.to(at::kDouble), wd));
    }
    at::Tensor sparse = at::zeros({10, 40});
    sparse.select(1, 3).fill_(2.f);
    expect_close(kernels::packed_linear_input_grad(sparse, w), at::matmul(sparse.to(at::kDouble), wd));
  }
}

TEST(LinearInputGrad, TheSameOnEveryThreadCount) {
  const int saved = at::get_num_threads();
  at::manual_seed(3);
  const PackedMatrix pw = random_matrix(PackedType::Q4_1, 96, 576, 9);
  const at::Tensor w = at::randn({96, 576}), g = at::randn({10, 96});
  at::set_num_threads(1);
  const at::Tensor a = kernels::linear_input_grad(g, w), pa = kernels::packed_linear_input_grad(g, pw);
  at::set_num_threads(std::max(2, saved));
  const at::Tensor b = kernels::linear_input_grad(g, w), pb = kernels::packed_linear_input_grad(g, pw);
  at::set_num_threads(saved);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_TRUE(at::equal(pa, pb));
}

}  // namespace
}  // namespace nnsight
