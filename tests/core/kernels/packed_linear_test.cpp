// kernels::packed_linear / packed_embedding on every packed type: bitwise
// equal to kernels::linear on the dequantized matrix (which is itself checked
// against float64 here, to float32 rounding) at 1, 3, 8, 32 and 128 rows on
// each path, batch invariant, and the reference decoders of the 5-bit types
// against ggml's formulas written out element by element.
#include "core/kernels/packed_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/linear.h"
#include "core/kernels/packed_matrix.h"
#include "support/bitwise_equal.h"

namespace nnsight {
namespace {

using kernels::PackedMatrix;
using kernels::PackedPath;
using kernels::PackedType;

struct ThreadCountGuard {
  int saved = at::get_num_threads();
  ~ThreadCountGuard() { at::set_num_threads(saved); }
};

using testing::bitwise_equal;

uint16_t half_bits(float v) {
  at::Tensor h = at::full({1}, v, at::kFloat).to(at::kHalf);
  uint16_t bits;
  std::memcpy(&bits, h.data_ptr(), 2);
  return bits;
}

void put_half(uint8_t* p, float v) {
  const uint16_t b = half_bits(v);
  std::memcpy(p, &b, 2);
}

// Random blocks of `type`: random quant bytes, scales drawn so weights are of
// order 0.1 (the f16 fields set to finite values).
std::vector<uint8_t> random_blocks(PackedType type, int64_t nblocks, uint32_t seed) {
  const auto& t = kernels::packed_traits(type);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f), sign(-1.f, 1.f);
  std::vector<uint8_t> data(static_cast<size_t>(nblocks * t.block_bytes));
  for (auto& b : data) b = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < nblocks; ++i) {
    uint8_t* b = data.data() + i * t.block_bytes;
    switch (type) {
      case PackedType::Q4_0:
      case PackedType::Q5_0:
      case PackedType::Q8_0:
        put_half(b, scale(rng) * (sign(rng) < 0 ? -1.f : 1.f));
        break;
      case PackedType::Q4_1:
      case PackedType::Q5_1:
        put_half(b, scale(rng));
        put_half(b + 2, -8.f * scale(rng));
        break;
      case PackedType::Q4_K:
      case PackedType::Q5_K:
        put_half(b, scale(rng) / 8.f);
        put_half(b + 2, scale(rng) / 8.f);
        break;
      case PackedType::Q6_K:
        put_half(b + 208, scale(rng) / 16.f);
        break;
    }
  }
  return data;
}

PackedMatrix random_matrix(PackedType type, int64_t rows, int64_t cols, uint32_t seed) {
  const auto& t = kernels::packed_traits(type);
  std::vector<uint8_t> data = random_blocks(type, rows * cols / t.block_size, seed);
  return kernels::make_packed_matrix(type, rows, cols, data.data());
}

int64_t test_cols(PackedType type) { return kernels::packed_traits(type).block_size == 32 ? 576 : 512; }

std::vector<PackedPath> available_paths() {
  std::vector<PackedPath> out = {PackedPath::Auto, PackedPath::Tiles};
  if (kernels::packed_path_available(PackedPath::Fused)) out.push_back(PackedPath::Fused);
  return out;
}

const char* path_name(PackedPath p) {
  return p == PackedPath::Auto ? "auto" : p == PackedPath::Fused ? "fused" : "tiles";
}

class PackedLinear : public ::testing::TestWithParam<PackedType> {};

TEST_P(PackedLinear, EqualsLinearOnTheDequantizedMatrixBitwiseAtEveryRowCount) {
  const PackedType type = GetParam();
  const int64_t K = test_cols(type), N = 37;  // N: not a multiple of any tile width
  PackedMatrix w = random_matrix(type, N, K, 11);
  at::Tensor wd = w.dequantize();  // [N, K]
  ASSERT_TRUE(at::isfinite(wd).all().item<bool>());
  at::Generator gen = at::detail::createCPUGenerator(5);
  at::Tensor bias = at::randn({N}, gen, at::kFloat);
  std::vector<int64_t> row_counts = {1, 3, 8, 32, 128};
  // Where Auto leaves the fused tiles for this type, and one row past it.
  if (const int64_t f = kernels::packed_fused_max_rows(type); f > 0) row_counts.insert(row_counts.end(), {f, f + 1});
  for (int64_t M : row_counts) {
    at::Tensor x = at::randn({M, K}, gen, at::kFloat);
    // The dequantized float32 kernel is right to float32 rounding ...
    at::Tensor expect = kernels::linear(x, wd, bias);  // [M, N]
    at::Tensor exact = at::linear(x.to(at::kDouble), wd.to(at::kDouble), bias.to(at::kDouble));
    const double scale = at::linear(x.abs().to(at::kDouble), wd.abs().to(at::kDouble)).max().item<double>();
    EXPECT_LE((expect.to(at::kDouble) - exact).abs().max().item<double>(), 1e-5 * scale + 1e-6);
    // ... and the packed kernel gives its very bits, on every path.
    for (PackedPath p : available_paths()) {
      SCOPED_TRACE(std::string(kernels::packed_traits(type).name) + " M=" + std::to_string(M) + " " + path_name(p));
      EXPECT_TRUE(bitwise_equal(kernels::packed_linear_on_path(p, x, w, bias), expect));
      EXPECT_TRUE(
          bitwise_equal(kernels::packed_linear_on_path(p, x, w, at::Tensor()), kernels::linear(x, wd, at::Tensor())));
    }
  }
}

TEST_P(PackedLinear, FusedTilesEqualTheDequantizedLinearAtEveryRowLength) {
  // The fused tiles convert the scales of whole groups of 16 blocks ahead, in
  // chunks of 64, and the blocks after the last whole group one by one: row
  // lengths below, at and across those bounds.
  const PackedType type = GetParam();
  if (!kernels::packed_path_available(PackedPath::Fused)) GTEST_SKIP() << "the fused path needs AVX-512";
  const int64_t bs = kernels::packed_traits(type).block_size;
  at::Generator gen = at::detail::createCPUGenerator(8);
  for (int64_t blocks : {1, 15, 16, 17, 47, 64, 80, 130}) {
    if (bs * blocks > 130 * 32) continue;  // the 256-element types: up to 16 blocks
    const int64_t K = bs * blocks, N = 9;
    PackedMatrix w = random_matrix(type, N, K, static_cast<uint32_t>(30 + blocks));
    at::Tensor wd = w.dequantize();  // [N, K]
    for (int64_t M : {1, 2, 4, 5, 8}) {
      SCOPED_TRACE(std::string(kernels::packed_traits(type).name) + " K=" + std::to_string(K) +
                   " M=" + std::to_string(M));
      at::Tensor x = at::randn({M, K}, gen, at::kFloat);
      EXPECT_TRUE(bitwise_equal(kernels::packed_linear_on_path(PackedPath::Fused, x, w, at::Tensor()),
                                kernels::linear(x, wd, at::Tensor())));
    }
  }
}

TEST_P(PackedLinear, EachInstructionSetEqualsItsOwnFloat32KernelBitwise) {
  // What a CPU without AVX-512 (AVX2 tiles) or without AVX2 (the portable
  // decoder and scalar tiles) runs, checked on this one: each instruction
  // set's packed kernel against kernels::linear on the same set, at row
  // counts on both sides of every tile height and of the fused path's end,
  // and row lengths from one block to past the tiles' scale chunks.
  const PackedType type = GetParam();
  const int64_t bs = kernels::packed_traits(type).block_size;
  at::Generator gen = at::detail::createCPUGenerator(9);
  int checked = 0;
  for (kernels::LinearPath isa :
       {kernels::LinearPath::Avx512, kernels::LinearPath::Avx2, kernels::LinearPath::Scalar}) {
    if (!kernels::packed_path_available(PackedPath::Tiles, isa)) continue;
    for (int64_t blocks : {1, 3, 18, 80}) {
      if (bs * blocks > 80 * 32) continue;  // the 256-element types: up to 10 blocks
      const int64_t K = bs * blocks, N = 19;
      PackedMatrix w = random_matrix(type, N, K, static_cast<uint32_t>(40 + blocks));
      at::Tensor wd = w.dequantize();  // [N, K]
      at::Tensor bias = at::randn({N}, gen, at::kFloat);
      for (int64_t M : {1, 2, 3, 4, 5, 8, 9, 17, 33}) {
        at::Tensor x = at::randn({M, K}, gen, at::kFloat);
        at::Tensor expect = kernels::linear_on_path(isa, x, wd, bias);
        for (PackedPath p : {PackedPath::Auto, PackedPath::Fused, PackedPath::Tiles}) {
          if (!kernels::packed_path_available(p, isa)) continue;
          SCOPED_TRACE(std::string(kernels::packed_traits(type).name) + " " + kernels::linear_path_name(isa) +
                       " K=" + std::to_string(K) + " M=" + std::to_string(M) + " " + path_name(p));
          EXPECT_TRUE(bitwise_equal(kernels::packed_linear_on_path(p, isa, x, w, bias), expect));
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_THROW(kernels::packed_linear_on_path(PackedPath::Fused, kernels::LinearPath::Scalar, at::randn({1, 4 * bs}),
                                              random_matrix(type, 2, 4 * bs, 1), at::Tensor()),
               c10::Error);
}

TEST_P(PackedLinear, EveryRowIsTheSameAloneOrInAnyBatchAndThreadCount) {
  const PackedType type = GetParam();
  const int64_t K = test_cols(type), N = 53, M = 37;
  PackedMatrix w = random_matrix(type, N, K, 12);
  at::Generator gen = at::detail::createCPUGenerator(6);
  at::Tensor x = at::randn({M, K}, gen, at::kFloat);
  ThreadCountGuard guard;
  at::set_num_threads(1);
  std::vector<at::Tensor> alone;
  for (int64_t i = 0; i < M; ++i) alone.push_back(kernels::packed_linear(x.narrow(0, i, 1), w, at::Tensor()));
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (int64_t h : {2, 5, 8, 9, 16, 37}) {
      for (int64_t s = 0; s + h <= M; s += h) {
        // Garbage in the other rows must not matter.
        at::Tensor xb = at::full({h + 2, K}, std::numeric_limits<float>::quiet_NaN());
        xb.narrow(0, 1, h).copy_(x.narrow(0, s, h));
        at::Tensor y = kernels::packed_linear(xb, w, at::Tensor());
        for (int64_t i = 0; i < h; ++i)
          ASSERT_TRUE(bitwise_equal(y.narrow(0, 1 + i, 1), alone[static_cast<size_t>(s + i)]))
              << "row " << s + i << " in a window of " << h << " at " << threads << " threads";
      }
    }
  }
}

TEST_P(PackedLinear, ManyMatricesAtOnceEqualOneCallEach) {
  // q/k/v-like: the same input width, different heights (one not a multiple
  // of the 16-row units), a bias on one of them; another type mixed in.
  const PackedType type = GetParam();
  const int64_t K = test_cols(type);
  const PackedType other = type == PackedType::Q8_0 ? PackedType::Q4_1 : PackedType::Q8_0;
  PackedMatrix a = random_matrix(type, 37, K, 21), b = random_matrix(type, 16, K, 22),
               c = random_matrix(type, 5, K, 23);
  at::Generator gen = at::detail::createCPUGenerator(7);
  at::Tensor bias_b = at::randn({16}, gen, at::kFloat);
  std::vector<int64_t> row_counts = {1, 3, 8, 9, 32};
  // Where the one-job path ends for this type, and one row past it.
  if (const int64_t f = kernels::packed_fused_max_rows(type); f > 0) row_counts.insert(row_counts.end(), {f, f + 1});
  ThreadCountGuard guard;
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (int64_t M : row_counts) {
      SCOPED_TRACE("M=" + std::to_string(M) + " threads=" + std::to_string(threads));
      at::Tensor x = at::randn({M, K}, gen, at::kFloat);
      const std::vector<at::Tensor> ys =
          kernels::packed_linear_many(x, {&a, &b, &c}, {at::Tensor(), bias_b, at::Tensor()});
      ASSERT_EQ(ys.size(), 3u);
      EXPECT_TRUE(bitwise_equal(ys[0], kernels::packed_linear(x, a, at::Tensor())));
      EXPECT_TRUE(bitwise_equal(ys[1], kernels::packed_linear(x, b, bias_b)));
      EXPECT_TRUE(bitwise_equal(ys[2], kernels::packed_linear(x, c, at::Tensor())));
      PackedMatrix d = random_matrix(other, 20, K, 24);  // K (576 or 512) is whole blocks of 32
      const std::vector<at::Tensor> mixed = kernels::packed_linear_many(x, {&d, &a}, {});
      EXPECT_TRUE(bitwise_equal(mixed[0], kernels::packed_linear(x, d, at::Tensor())));
      EXPECT_TRUE(bitwise_equal(mixed[1], kernels::packed_linear(x, a, at::Tensor())));
    }
  }
  EXPECT_THROW(kernels::packed_linear_many(at::randn({1, K}), {&a, &b}, {at::Tensor()}), c10::Error);
}

TEST_P(PackedLinear, EmbeddingRowsEqualTheDequantizedRows) {
  const PackedType type = GetParam();
  PackedMatrix w = random_matrix(type, 29, test_cols(type), 13);
  at::Tensor ids = at::tensor(std::vector<int64_t>{0, 28, 3, 3, 17}, at::kLong);
  at::Tensor expect = w.dequantize().index_select(0, ids);
  EXPECT_TRUE(bitwise_equal(kernels::packed_embedding(w, ids, at::kFloat), expect));
  EXPECT_TRUE(bitwise_equal(kernels::packed_embedding(w, ids, at::kBFloat16), expect.to(at::kBFloat16)));
}

TEST_P(PackedLinear, RowPermutationAndSlicesNeedNoCopy) {
  const PackedType type = GetParam();
  const int64_t bs = kernels::packed_traits(type).block_size, K = 4 * bs;
  PackedMatrix w = random_matrix(type, 12, K, 14);
  at::Tensor wd = w.dequantize();
  std::vector<int64_t> perm = {3, 0, 11, 5, 7, 1, 2, 4, 6, 8, 10, 9};
  PackedMatrix p = w.select_rows(perm);
  EXPECT_EQ(p.data, w.data);
  at::Tensor idx = at::tensor(perm, at::kLong);
  EXPECT_TRUE(bitwise_equal(p.dequantize(), wd.index_select(0, idx)));
  EXPECT_TRUE(bitwise_equal(p.narrow_rows(2, 5).dequantize(), wd.index_select(0, idx).narrow(0, 2, 5)));
  EXPECT_TRUE(bitwise_equal(w.narrow_cols(bs, 2 * bs).dequantize(), wd.narrow(1, bs, 2 * bs)));
  at::Tensor x = at::randn({3, 2 * bs});
  EXPECT_TRUE(
      bitwise_equal(kernels::packed_linear(x, p.narrow_cols(bs, 2 * bs), at::Tensor()),
                    kernels::linear(x, wd.index_select(0, idx).narrow(1, bs, 2 * bs).contiguous(), at::Tensor())));
  EXPECT_THROW(w.narrow_cols(1, bs), c10::Error);
  // The kernels walk a permuted matrix in memory order (scan_order) and
  // still write every logical row's column, at every row count and path,
  // also with repeated rows (a replicated tensor-parallel slice) and a bias.
  EXPECT_EQ(p.scan_order, (std::vector<int64_t>{1, 5, 6, 0, 7, 3, 8, 4, 9, 11, 10, 2}));
  std::vector<int64_t> rep = {5, 5, 0, 11, 2, 2, 9};
  PackedMatrix pr = p.select_rows(rep);
  at::Tensor wr = wd.index_select(0, idx).index_select(0, at::tensor(rep, at::kLong));  // [7, K]
  at::Tensor bias = at::randn({7});
  for (int64_t M : {1, 3, 9})
    for (PackedPath path : available_paths()) {
      at::Tensor xm = at::randn({M, K});
      EXPECT_TRUE(bitwise_equal(kernels::packed_linear_on_path(path, xm, pr, bias), kernels::linear(xm, wr, bias)))
          << "M=" << M << " " << path_name(path);
    }
}

TEST_P(PackedLinear, BFloat16ActivationsAreComputedInFloat32) {
  const PackedType type = GetParam();
  PackedMatrix w = random_matrix(type, 20, test_cols(type), 15);
  at::Tensor x = at::randn({3, test_cols(type)}).to(at::kBFloat16);
  at::Tensor y = kernels::packed_linear(x, w, at::Tensor());
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(bitwise_equal(y, kernels::linear(x.to(at::kFloat), w.dequantize(), at::Tensor()).to(at::kBFloat16)));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, PackedLinear, ::testing::ValuesIn(kernels::all_packed_types()),
                         [](const ::testing::TestParamInfo<PackedType>& info) {
                           return std::string(kernels::packed_traits(info.param).name);
                         });

// ggml's formulas for the 5-bit types, element by element.
float spec_q5(PackedType type, const uint8_t* b, int e) {
  auto f16 = [](const uint8_t* p) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    at::Tensor h = at::empty({1}, at::kHalf);
    std::memcpy(h.data_ptr(), &bits, 2);
    return h.to(at::kFloat).item<float>();
  };
  if (type == PackedType::Q5_0 || type == PackedType::Q5_1) {
    const bool min = type == PackedType::Q5_1;
    uint32_t qh;
    std::memcpy(&qh, b + (min ? 4 : 2), 4);
    const uint8_t* qs = b + (min ? 8 : 6);
    const int nib = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
    const int q = nib + 16 * static_cast<int>((qh >> e) & 1u);
    return min ? f16(b) * static_cast<float>(q) + f16(b + 2) : f16(b) * static_cast<float>(q - 16);
  }
  // Q5_K: sub-block s = e / 32, its 64-group g = s / 2.
  const int s = e / 32, l = e % 32, g = s / 2;
  const uint8_t* sc = b + 4;
  int scale, mn;
  if (s < 4) {
    scale = sc[s] & 63;
    mn = sc[s + 4] & 63;
  } else {
    scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4);
    mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  }
  const uint8_t q8 = b[48 + 32 * g + l];
  const int nib = (s % 2 == 0) ? q8 & 15 : q8 >> 4;
  const int q = nib + (((b[16 + l] >> s) & 1) ? 16 : 0);
  return f16(b) * static_cast<float>(scale) * static_cast<float>(q) - f16(b + 2) * static_cast<float>(mn);
}

TEST(PackedDecode, FiveBitTypesFollowGgmlsLayout) {
  for (PackedType type : {PackedType::Q5_0, PackedType::Q5_1, PackedType::Q5_K}) {
    const auto& t = kernels::packed_traits(type);
    std::vector<uint8_t> blocks = random_blocks(type, 3, 21);
    std::vector<float> got(static_cast<size_t>(3 * t.block_size));
    kernels::decode_packed_reference(type, blocks.data(), got.data(), 3 * t.block_size);
    for (int64_t b = 0; b < 3; ++b)
      for (int e = 0; e < t.block_size; ++e)
        ASSERT_EQ(got[static_cast<size_t>(b * t.block_size + e)], spec_q5(type, blocks.data() + b * t.block_bytes, e))
            << t.name << " block " << b << " element " << e;
  }
}

}  // namespace
}  // namespace nnsight
