// kernels::packed_linear_q8 (8-bit activations, integer dot products) against
// a plain reference written here: each block of x rounded as llama.cpp's
// quantize_row_q8_1 does (per super-block of 256 for the K-quants, as its
// Q8_K), each block's product an exact integer sum (the K-quants: the rounded
// x times the dequantized weights), the scaling in double; within float32
// rounding of it. And against the exact
// float32 product within the bound the rounding of x allows; every row the
// same alone or in any batch and thread count; the types it does not run
// refused by name.
#include "core/kernels/packed_linear_q8.h"
#include "core/kernels/packed_linear_q8_internal.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/kernels/linear.h"
#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_matrix.h"
#include "support/bitwise_equal.h"

namespace nnsight {
namespace {

using kernels::PackedMatrix;
using kernels::PackedType;
using testing::bitwise_equal;

int64_t block_bytes(PackedType type) { return kernels::packed_traits(type).block_bytes; }
bool is_k_quant(PackedType type) {
  return type == PackedType::Q4_K || type == PackedType::Q5_K || type == PackedType::Q6_K;
}
// Elements per rounding block of x: 32, or a K-quant's super-block of 256.
int64_t rounding_block(PackedType type) { return is_k_quant(type) ? 256 : 32; }

struct ThreadCountGuard {
  int saved = at::get_num_threads();
  ~ThreadCountGuard() { at::set_num_threads(saved); }
};

float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return at::from_blob(&bits, {1}, at::kHalf).to(at::kFloat).item<float>();
}

void put_half(uint8_t* p, float v) {
  at::Tensor h = at::full({1}, v, at::kFloat).to(at::kHalf);
  std::memcpy(p, h.data_ptr(), 2);
}

// Random blocks with a real model's scales: Q4_1 d 0.001-0.02 and m about
// -8 d; Q4_0 d 0.001-0.02; Q8_0 d of either sign, |d| 0.001-0.02 / 8; Q4_K
// and Q5_K d and dmin 0.001-0.02 / 32 (times 6-bit scales and mins); Q6_K d 0.001-0.02 / 64
// (times int8 scales). The other bytes (nibbles, packed scales) random.
std::vector<uint8_t> random_blocks(PackedType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  const int64_t bytes = block_bytes(type);
  std::vector<uint8_t> data(static_cast<size_t>(rows * cols / kernels::packed_traits(type).block_size * bytes));
  for (auto& b : data) b = static_cast<uint8_t>(byte(rng));
  for (size_t i = 0; i < data.size(); i += static_cast<size_t>(bytes)) {
    if (type == PackedType::Q4_1) {
      put_half(&data[i], scale(rng));
      put_half(&data[i + 2], -8.f * scale(rng));
    } else if (type == PackedType::Q4_0) {
      put_half(&data[i], scale(rng));
    } else if (type == PackedType::Q8_0) {
      put_half(&data[i], scale(rng) / 8.f * (byte(rng) < 128 ? -1.f : 1.f));
    } else if (type == PackedType::Q4_K || type == PackedType::Q5_K) {
      put_half(&data[i], scale(rng) / 32.f);
      put_half(&data[i + 2], scale(rng) / 32.f);
    } else {
      put_half(&data[i + 208], scale(rng) / 64.f);
    }
  }
  return data;
}

// One weight block (ggml's layout, written out) times a block of rounded
// activations q (scale d, sum s): {scale term, min term} in double, the
// integer dot product exact.
std::pair<double, double> block_product(PackedType type, const uint8_t* blk, const int* q, float d, float s) {
  int64_t dot = 0;
  if (type == PackedType::Q4_1) {
    for (int k = 0; k < 16; ++k) {
      dot += static_cast<int64_t>(blk[4 + k] & 0x0F) * q[k];
      dot += static_cast<int64_t>(blk[4 + k] >> 4) * q[16 + k];
    }
    return {double(half_at(blk)) * d * double(dot), double(half_at(blk + 2)) * s};
  }
  if (type == PackedType::Q4_0) {  // weight d (n - 8): the kernel's two terms, d d_x sum n q and -8 d s
    int64_t nq = 0;
    for (int k = 0; k < 16; ++k) nq += static_cast<int64_t>(blk[2 + k] & 0x0F) * q[k] + (blk[2 + k] >> 4) * q[16 + k];
    return {double(half_at(blk)) * d * double(nq), -8.0 * double(half_at(blk)) * s};
  }
  for (int k = 0; k < 32; ++k) dot += static_cast<int64_t>(static_cast<int8_t>(blk[2 + k])) * q[k];
  return {double(half_at(blk)) * d * double(dot), 0.0};
}

// Activations with a few large outliers, as in a residual stream.
at::Tensor activations(int64_t M, int64_t K, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor x = at::randn({M, K}, gen, at::kFloat);
  return x * (1 + 29 * (at::rand({M, K}, gen) < 0.02).to(at::kFloat));
}

// The reference: llama.cpp's rounding of one block of x (scalar code), the
// integer product with the weight block's nibbles, the scales in double.
struct Reference {
  at::Tensor y;      // [M, N] float64
  at::Tensor bound;  // [M, N] float64: sum over blocks of |dw d dot| + |mw s| (the terms' magnitude)
};

// The K-quants' reference: x rounded per super-block of 256 (one scale each,
// llama.cpp's Q8_K with amax / 127), times the dequantized weights, in double
// (the integer sums the kernel forms are exact in double).
Reference k_reference(PackedType type, const at::Tensor& x, const std::vector<uint8_t>& w, int64_t N,
                      const at::Tensor& bias) {
  const int64_t M = x.size(0), K = x.size(1), n = K / 256;
  at::Tensor wd = kernels::make_packed_matrix(type, N, K, w.data()).dequantize().to(at::kDouble);  // [N, K]
  at::Tensor xr = at::zeros({M, K}, at::kDouble);  // x as rounded: d * q
  const float* xp = x.data_ptr<float>();
  double* rp = xr.data_ptr<double>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < n; ++b) {
      const float* xb = xp + m * K + 256 * b;
      float amax = 0.f;
      for (int64_t k = 0; k < 256; ++k) amax = std::max(amax, std::fabs(xb[k]));
      const float d = amax / 127.f, id = std::isfinite(127.f / amax) ? 127.f / amax : 0.f;
      for (int64_t k = 0; k < 256; ++k) rp[m * K + 256 * b + k] = double(d) * std::nearbyint(xb[k] * id);
    }
  at::Tensor y = at::linear(xr, wd, bias.defined() ? bias.to(at::kDouble) : at::Tensor());
  return {y, at::linear(xr.abs(), wd.abs())};
}

Reference reference(PackedType type, const at::Tensor& x, const std::vector<uint8_t>& w, int64_t N,
                    const at::Tensor& bias) {
  if (is_k_quant(type)) return k_reference(type, x, w, N, bias);
  const int64_t M = x.size(0), K = x.size(1), nb = K / 32;
  at::Tensor y = at::zeros({M, N}, at::kDouble), bound = at::zeros({M, N}, at::kDouble);
  const float* xp = x.data_ptr<float>();
  double* yp = y.data_ptr<double>();
  double* bp = bound.data_ptr<double>();
  at::Tensor b = bias.defined() ? bias.to(at::kDouble).contiguous() : at::zeros({N}, at::kDouble);
  for (int64_t m = 0; m < M; ++m) {
    std::vector<int> q(static_cast<size_t>(K));
    std::vector<float> d(static_cast<size_t>(nb)), s(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) {
      float amax = 0.f;
      for (int64_t k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(xp[m * K + 32 * b + k]));
      d[b] = amax / 127.f;
      const float id = std::isfinite(127.f / amax) ? 127.f / amax : 0.f;  // 0: the block rounds to zeros
      int sum = 0;
      for (int64_t k = 0; k < 32; ++k) {
        q[32 * b + k] = static_cast<int>(std::nearbyint(xp[m * K + 32 * b + k] * id));
        sum += q[32 * b + k];
      }
      s[b] = d[b] * static_cast<float>(sum);
    }
    for (int64_t n = 0; n < N; ++n) {
      double acc = b.data_ptr<double>()[n], mag = 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = &w[static_cast<size_t>((n * nb + b) * block_bytes(type))];
        const auto [t1, t2] = block_product(type, blk, &q[static_cast<size_t>(32 * b)], d[b], s[b]);
        acc += t1 + t2;
        mag += std::fabs(t1) + std::fabs(t2);
      }
      yp[m * N + n] = acc;
      bp[m * N + n] = mag;
    }
  }
  return {y, bound};
}

class PackedLinearQ8 : public ::testing::TestWithParam<PackedType> {
 protected:
  void SetUp() override {
    if (!kernels::packed_q8_available(GetParam())) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  }
  PackedMatrix matrix(const std::vector<uint8_t>& data, int64_t rows, int64_t cols) const {
    return kernels::make_packed_matrix(GetParam(), rows, cols, data.data());
  }
};

TEST_P(PackedLinearQ8, EqualsTheIntegerReferenceToFloatRoundingAtEveryRowLength) {
  // Row lengths of 1-5 blocks (within one group of 4, across it) and the
  // default model's 576 and 1536 (K-quants: 1-3 super-blocks and 1536);
  // N = 37, not a multiple of the tile's 4. Every instruction set here, and
  // packed_linear_q8's pick.
  const std::vector<const kernels::detail::Q8Kernels*> isas = kernels::detail::q8_kernels_here();
  ASSERT_FALSE(isas.empty());
  const std::vector<int64_t> lengths = is_k_quant(GetParam()) ? std::vector<int64_t>{256, 512, 768, 1536}
                                                              : std::vector<int64_t>{32, 64, 96, 128, 160, 576, 1536};
  for (int64_t K : lengths) {
    const int64_t N = 37;
    const std::vector<uint8_t> data = random_blocks(GetParam(), N, K, static_cast<uint32_t>(K));
    const PackedMatrix w = matrix(data, N, K);
    at::Tensor bias = at::randn({N}, at::detail::createCPUGenerator(3), at::kFloat);
    for (int64_t M : {1, 2, 3, 4, 9}) {
      at::Tensor x = activations(M, K, static_cast<uint64_t>(K + M));
      const Reference ref = reference(GetParam(), x, data, N, bias);
      for (size_t k = 0; k <= isas.size(); ++k) {
        SCOPED_TRACE("K=" + std::to_string(K) + " M=" + std::to_string(M) + " " +
                     (k < isas.size() ? isas[k]->name : "packed_linear_q8"));
        at::Tensor y = k < isas.size() ? kernels::detail::packed_linear_q8_on(*isas[k], x, w, bias)
                                       : kernels::packed_linear_q8(x, w, bias);  // [M, N]
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{M, N}));
        const double err = ((y.to(at::kDouble) - ref.y).abs() - 1e-5 * ref.bound).max().item<double>();
        EXPECT_LE(err, 1e-6);
      }
    }
  }
}

// Weights at the ends of their ranges: Q8_0's -128 (which vpsignb cannot
// negate: the AVX2 tile takes |w| as unsigned) and 127, Q4_1's and Q4_K's
// nibbles 0 and 15 (Q4_K's scales and mins at 63), Q6_K's 6-bit values 0
// and 63 with scales -128 and 127, against activations at +-127 after
// rounding (every element of a block as large as its largest): each pair of
// products, and each integer sum, at its largest.
TEST_P(PackedLinearQ8, WeightsAndActivationsAtTheEndsOfTheirRanges) {
  const PackedType type = GetParam();
  const int64_t N = 8, K = 512, M = 3;
  std::vector<uint8_t> data = random_blocks(type, N, K, 41);
  const int64_t bytes = block_bytes(type);
  for (size_t blk = 0; blk < data.size(); blk += static_cast<size_t>(bytes)) {
    const size_t nth = blk / static_cast<size_t>(bytes);
    const auto fill = [&](int64_t from, int64_t to, uint8_t v) {
      for (int64_t k = from; k < to; ++k) data[blk + static_cast<size_t>(k)] = v;
    };
    switch (type) {
      case PackedType::Q4_1:
        fill(4, bytes, nth % 2 == 0 ? 0xFF : 0x00);
        break;
      case PackedType::Q4_0:
        fill(2, bytes, nth % 2 == 0 ? 0xFF : 0x00);  // weights 7 d or -8 d
        break;
      case PackedType::Q8_0:
        if (nth % 3 == 2) {
          for (int64_t k = 2; k < bytes; ++k) data[blk + static_cast<size_t>(k)] = k % 2 == 0 ? 0x80 : 0x7F;
        } else {
          fill(2, bytes, nth % 3 == 0 ? 0x80 : 0x7F);
        }
        break;
      case PackedType::Q4_K:
      case PackedType::Q5_K:
        fill(4, 16, 0xFF);                            // every scale and min 63
        fill(16, bytes, nth % 2 == 0 ? 0xFF : 0x00);  // Q5_K: fifth bits too, values 31 or 0
        break;
      default:                                       // Q6_K
        fill(0, 192, nth % 2 == 0 ? 0xFF : 0x00);    // 6-bit values 63 or 0
        fill(192, 208, nth % 3 == 0 ? 0x80 : 0x7F);  // scales -128 or 127
        break;
    }
  }
  const PackedMatrix w = matrix(data, N, K);
  at::Tensor x = at::full({M, K}, 3.5f);  // every element 127 after rounding
  x[1].mul_(-1.f);                        // -127
  x[2] = at::where(at::arange(K) % 2 == 0, at::full({K}, 2.f), at::full({K}, -2.f));
  const Reference ref = reference(type, x, data, N, at::Tensor());
  for (const auto* isa : kernels::detail::q8_kernels_here()) {
    SCOPED_TRACE(isa->name);
    at::Tensor y = kernels::detail::packed_linear_q8_on(*isa, x, w, at::Tensor());
    const double err = ((y.to(at::kDouble) - ref.y).abs() - 1e-5 * ref.bound).max().item<double>();
    EXPECT_LE(err, 1e-6);
  }
}

// A block of zeros, and one so small that 127 / max|x| overflows, round to
// zeros on every instruction set: the row's product is exactly 0.
TEST_P(PackedLinearQ8, ZeroAndTinyRowsGiveExactZeros) {
  const int64_t N = 12, K = 512;
  const std::vector<uint8_t> data = random_blocks(GetParam(), N, K, 43);
  const PackedMatrix w = matrix(data, N, K);
  at::Tensor x = at::zeros({3, K});
  x[1].fill_(1e-38f);  // 127 / 1e-38 is beyond float's range
  x[2].copy_(at::randn({K}, at::detail::createCPUGenerator(44), at::kFloat) * 1e-38f);
  for (const auto* isa : kernels::detail::q8_kernels_here()) {
    SCOPED_TRACE(isa->name);
    EXPECT_TRUE(bitwise_equal(kernels::detail::packed_linear_q8_on(*isa, x, w, at::Tensor()), at::zeros({3, N})));
  }
}

TEST_P(PackedLinearQ8, IsWithinTheRoundingOfXOfTheExactProduct) {
  const int64_t N = 64, K = is_k_quant(GetParam()) ? 768 : 576, M = 8, R = rounding_block(GetParam());
  const std::vector<uint8_t> data = random_blocks(GetParam(), N, K, 7);
  const PackedMatrix w = matrix(data, N, K);
  at::Tensor wd = w.dequantize();  // [N, K]
  at::Tensor x = activations(M, K, 8);
  // Each element of x moves by at most half its block's step (max |x| / 127):
  // |y_q8 - y| <= sum over k of |w_k| max|x| / 254, plus float32 rounding (of
  // terms up to a few times |x w|: the scale and min terms cancel in w).
  at::Tensor half_step =
      x.view({M, K / R, R}).abs().amax(-1, true).expand({M, K / R, R}).reshape({M, K}) / 254.0;  // [M, K]
  at::Tensor allowed = at::linear(half_step.to(at::kDouble), wd.abs().to(at::kDouble));          // [M, N]
  at::Tensor magnitude = at::linear(x.abs().to(at::kDouble), wd.abs().to(at::kDouble));
  at::Tensor exact = at::linear(x.to(at::kDouble), wd.to(at::kDouble));
  at::Tensor diff = (kernels::packed_linear_q8(x, w, at::Tensor()).to(at::kDouble) - exact).abs();
  EXPECT_TRUE((diff <= allowed * 1.0001 + 1e-4 * magnitude).all().item<bool>());
  // And the rounding is not nothing: the int8 path is not the float path.
  EXPECT_FALSE(
      bitwise_equal(kernels::packed_linear_q8(x, w, at::Tensor()), kernels::packed_linear(x, w, at::Tensor())));
}

TEST_P(PackedLinearQ8, EveryRowIsTheSameAloneOrInAnyBatchAndThreadCount) {
  ThreadCountGuard guard;
  const int64_t N = 300, K = is_k_quant(GetParam()) ? 768 : 576;  // N: several thread units, not a multiple of the tile
  const std::vector<uint8_t> data = random_blocks(GetParam(), N, K, 9);
  const PackedMatrix w = matrix(data, N, K);
  at::Tensor bias = at::randn({N}, at::detail::createCPUGenerator(4), at::kFloat);
  at::Tensor x = activations(11, K, 10);
  for (const auto* isa : kernels::detail::q8_kernels_here()) {
    SCOPED_TRACE(isa->name);
    const auto y = [&](const at::Tensor& rows) { return kernels::detail::packed_linear_q8_on(*isa, rows, w, bias); };
    at::set_num_threads(2);
    at::Tensor batch = y(x);  // [11, N]
    at::set_num_threads(1);
    for (int64_t m = 0; m < 11; ++m) {
      SCOPED_TRACE("row " + std::to_string(m));
      EXPECT_TRUE(bitwise_equal(y(x.narrow(0, m, 1)), batch.narrow(0, m, 1)));
    }
    EXPECT_TRUE(bitwise_equal(y(x.narrow(0, 3, 6)), batch.narrow(0, 3, 6)));
    EXPECT_TRUE(bitwise_equal(y(x.narrow(0, 4, 5)), batch.narrow(0, 4, 5)));
  }
}

TEST_P(PackedLinearQ8, KeepsTheShapeAndRowPermutationOfPackedLinear) {
  const int64_t N = 40, K = is_k_quant(GetParam()) ? 256 : 128;
  const std::vector<uint8_t> data = random_blocks(GetParam(), N, K, 12);
  const PackedMatrix w = matrix(data, N, K);
  // A permuted view (GGUF's q/k heads) gives the permuted columns.
  std::vector<int64_t> perm(N);
  for (int64_t i = 0; i < N; ++i) perm[i] = (i * 7) % N;
  const PackedMatrix wp = w.select_rows(perm);
  at::Tensor x = activations(6, K, 13).view({2, 3, K});
  at::Tensor y = kernels::packed_linear_q8(x, w, at::Tensor());  // [2, 3, N]
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, N}));
  at::Tensor yp = kernels::packed_linear_q8(x, wp, at::Tensor());
  EXPECT_TRUE(bitwise_equal(yp, y.index_select(-1, at::tensor(perm, at::kLong))));
}

// A layer's q/k/v (or gate/up) in one call: each output bitwise one call
// of its own, also with matrices of every other type mixed in (x rounded
// once per rounding: Q4_1 and Q8_0 need two with AVX-512, one with AVX2;
// the K-quants share one of 256) and with biases on some.
TEST_P(PackedLinearQ8, ManyMatricesInOneCallEqualOneCallEach) {
  ThreadCountGuard guard;
  const int64_t K = 1536;
  const std::vector<uint8_t> d0 = random_blocks(GetParam(), 96, K, 21), d1 = random_blocks(GetParam(), 37, K, 22);
  const PackedMatrix w0 = matrix(d0, 96, K), w1 = matrix(d1, 37, K);
  std::vector<std::vector<uint8_t>> other_data;
  std::vector<PackedMatrix> others;
  for (PackedType t :
       {PackedType::Q4_0, PackedType::Q4_1, PackedType::Q8_0, PackedType::Q4_K, PackedType::Q5_K, PackedType::Q6_K}) {
    if (t == GetParam() || !kernels::packed_q8_available(t)) continue;
    other_data.push_back(random_blocks(t, 64, K, 23 + static_cast<uint32_t>(others.size())));
    others.push_back(kernels::make_packed_matrix(t, 64, K, other_data.back().data()));
  }
  at::Tensor b1 = at::randn({37}, at::detail::createCPUGenerator(5), at::kFloat);
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (int64_t M : {1, 3, 7}) {
      for (bool mixed : {false, true}) {
        SCOPED_TRACE("M=" + std::to_string(M) + " threads=" + std::to_string(threads) + (mixed ? " mixed" : ""));
        at::Tensor x = activations(M, K, 30 + static_cast<uint32_t>(M));
        std::vector<const PackedMatrix*> ws{&w0, &w1};
        std::vector<at::Tensor> bs{at::Tensor(), b1};
        for (size_t i = 0; mixed && i < others.size(); ++i) {
          ws.insert(ws.begin() + 1, &others[i]);
          bs.insert(bs.begin() + 1, at::Tensor());
        }
        const std::vector<at::Tensor> outs = kernels::packed_linear_q8_many(x, ws, bs);
        ASSERT_EQ(outs.size(), ws.size());
        for (size_t i = 0; i < ws.size(); ++i)
          EXPECT_TRUE(bitwise_equal(outs[i], kernels::packed_linear_q8(x, *ws[i], bs[i]))) << "matrix " << i;
      }
    }
  }
}

// The default model's types (Q4_1, Q8_0), Q4_0, and the K-quants of
// llama.cpp's Q4_K_M and Q5_K_M files.
INSTANTIATE_TEST_SUITE_P(Types, PackedLinearQ8,
                         ::testing::Values(PackedType::Q4_0, PackedType::Q4_1, PackedType::Q8_0, PackedType::Q4_K,
                                           PackedType::Q5_K, PackedType::Q6_K),
                         [](const ::testing::TestParamInfo<PackedType>& info) {
                           return std::string(kernels::packed_traits(info.param).name);
                         });

TEST(PackedLinearQ8Types, RefusesTypesItDoesNotRun) {
  for (PackedType t : kernels::all_packed_types()) {
    if (kernels::packed_q8_available(t)) continue;
    const auto& traits = kernels::packed_traits(t);
    std::vector<uint8_t> zeros(static_cast<size_t>(traits.block_bytes), 0);
    const PackedMatrix w = kernels::make_packed_matrix(t, 1, traits.block_size, zeros.data());
    try {
      kernels::packed_linear_q8(at::zeros({1, traits.block_size}), w, at::Tensor());
      ADD_FAILURE() << traits.name << " was not refused";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(traits.name), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nnsight
