// Dequantization against blocks packed by hand from chosen quants and
// scales (expected values computed from those choices with the format's
// formula), against golden values from the reference Python `gguf` package,
// and parallel/row-range decoding against sequential whole decoding.
#include "core/gguf/dequantize.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>

#include <nnsight/error.hpp>

#include "support/expect_load_error.h"
#include "support/gguf_writer.h"

namespace nnsight {
namespace {

using testing::Bytes;
using testing::half_bits;
using testing::half_value;

std::vector<float> decode(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_blocks(type, bytes.data(), out.data(), n, "test");
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 + 1e-6 * std::fabs(want[i])) << "element " << i;
  }
}

class Dequantize : public ::testing::Test {
 protected:
  std::mt19937 rng{7};
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
};

TEST_F(Dequantize, Q8_0IsScaleTimesSignedByte) {
  // Two blocks with different scales.
  Bytes b;
  std::vector<double> want;
  for (float d : {0.5f, -0.0078125f}) {
    b.u16(half_bits(d));
    for (int j = 0; j < 32; ++j) {
      int q = (j % 2 == 0 ? -128 : 127) + (j % 2 == 0 ? j : -j);  // spans both extremes
      b.i8(static_cast<int8_t>(q));
      want.push_back(static_cast<double>(d) * q);
    }
  }
  expect_close(decode(GgmlType::Q8_0, b.data(), 64), want);
}

TEST_F(Dequantize, Q4_0IsScaleTimesNibbleMinusEight) {
  const float d = 0.25f;
  int q[32];
  for (int& v : q) v = uniform(0, 15);
  q[0] = 0;
  q[31] = 15;
  Bytes b;
  b.u16(half_bits(d));
  // Byte j holds element j in its low nibble and element j + 16 in its high nibble.
  for (int j = 0; j < 16; ++j) b.u8(static_cast<uint8_t>(q[j] | (q[j + 16] << 4)));
  std::vector<double> want;
  for (int i = 0; i < 32; ++i) want.push_back(d * (q[i] - 8));
  expect_close(decode(GgmlType::Q4_0, b.data(), 32), want);
}

TEST_F(Dequantize, Q4_1IsScaleTimesNibblePlusMin) {
  const float d = 0.125f, m = -1.5f;
  int q[32];
  for (int& v : q) v = uniform(0, 15);
  Bytes b;
  b.u16(half_bits(d)).u16(half_bits(m));
  for (int j = 0; j < 16; ++j) b.u8(static_cast<uint8_t>(q[j] | (q[j + 16] << 4)));
  std::vector<double> want;
  for (int i = 0; i < 32; ++i) want.push_back(d * q[i] + m);
  expect_close(decode(GgmlType::Q4_1, b.data(), 32), want);
}

// Q4_K: 8 sub-blocks of 32 with 6-bit scale sc[s] and min mn[s];
// x[i] = d * sc[i/32] * q[i] - dmin * mn[i/32].
TEST_F(Dequantize, Q4_KUsesSixBitScalesAndMinsPerSubBlock) {
  const float d = 0.0625f, dmin = 0.03125f;
  int sc[8], mn[8], q[256];
  for (int s = 0; s < 8; ++s) {
    sc[s] = uniform(0, 63);
    mn[s] = uniform(0, 63);
  }
  sc[7] = 63;  // exercise the high bits of the packed upper sub-blocks
  mn[4] = 48;
  for (int& v : q) v = uniform(0, 15);
  uint8_t packed[12] = {};
  // Bytes 0-3: scales 0-3 in bits 0-5, bits 4-5 of scales 4-7 in bits 6-7.
  // Bytes 4-7: mins 0-3 likewise with the mins 4-7.
  // Bytes 8-11: low 4 bits of scales 4-7 (low nibble) and mins 4-7 (high nibble).
  for (int s = 0; s < 4; ++s) {
    packed[s] = static_cast<uint8_t>(sc[s] | ((sc[s + 4] >> 4) << 6));
    packed[s + 4] = static_cast<uint8_t>(mn[s] | ((mn[s + 4] >> 4) << 6));
    packed[s + 8] = static_cast<uint8_t>((sc[s + 4] & 15) | ((mn[s + 4] & 15) << 4));
  }
  Bytes b;
  b.u16(half_bits(d)).u16(half_bits(dmin));
  for (uint8_t p : packed) b.u8(p);
  // 64-element groups share 32 bytes: first half in low nibbles, second in high.
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) b.u8(static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4)));
  }
  ASSERT_EQ(b.size(), 144u);
  std::vector<double> want;
  for (int i = 0; i < 256; ++i) want.push_back(double(d) * sc[i / 32] * q[i] - double(dmin) * mn[i / 32]);
  expect_close(decode(GgmlType::Q4_K, b.data(), 256), want);
}

// Q6_K: 6-bit quants q in [0, 63], one int8 scale per 16 elements;
// x[i] = d * scale[i/16] * (q[i] - 32).
TEST_F(Dequantize, Q6_KUsesSixBitQuantsAndSignedScalesPerSixteen) {
  const float d = 0.015625f;
  int sc[16], q[256];
  for (int& s : sc) s = uniform(-128, 127);
  for (int& v : q) v = uniform(0, 63);
  q[5] = 0;
  q[200] = 63;
  uint8_t ql[128] = {}, qh[64] = {};
  for (int i = 0; i < 256; ++i) {
    // Element i = 128 * half + 32 * quarter + l: its low 4 bits go to the
    // nibble (quarter >= 2 ? high : low) of ql[64 * half + 32 * (quarter % 2) + l],
    // its high 2 bits to bits 2 * quarter of qh[32 * half + l].
    int half = i / 128, quarter = (i % 128) / 32, l = i % 32;
    ql[64 * half + 32 * (quarter % 2) + l] |= static_cast<uint8_t>((q[i] & 15) << (quarter >= 2 ? 4 : 0));
    qh[32 * half + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * quarter));
  }
  Bytes b;
  for (uint8_t v : ql) b.u8(v);
  for (uint8_t v : qh) b.u8(v);
  for (int s : sc) b.i8(static_cast<int8_t>(s));
  b.u16(half_bits(d));
  ASSERT_EQ(b.size(), 210u);
  std::vector<double> want;
  for (int i = 0; i < 256; ++i) want.push_back(double(d) * sc[i / 16] * (q[i] - 32));
  expect_close(decode(GgmlType::Q6_K, b.data(), 256), want);
}

TEST_F(Dequantize, F16AndBF16FromKnownBitPatterns) {
  Bytes h;
  // 1.0, -2.0, 65504 (max), 2^-24 (smallest subnormal), -0.0, 0.333251953125
  for (uint16_t bits : {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x3555}) h.u16(bits);
  std::vector<float> got = decode(GgmlType::F16, h.data(), 6);
  EXPECT_EQ(got, (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24), -0.0f, 0.333251953125f}));
  EXPECT_TRUE(std::signbit(got[4]));
  Bytes bf;
  // 1.0, -3.0, 3.140625, 1e-38-ish 0x0080 = 2^-126
  for (uint16_t bits : {0x3F80, 0xC040, 0x4049, 0x0080}) bf.u16(bits);
  EXPECT_EQ(decode(GgmlType::BF16, bf.data(), 4), (std::vector<float>{1.0f, -3.0f, 3.140625f, std::ldexp(1.0f, -126)}));
  Bytes f;
  f.f32(1.25f).f32(-7.0f);
  EXPECT_EQ(decode(GgmlType::F32, f.data(), 2), (std::vector<float>{1.25f, -7.0f}));
}

TEST_F(Dequantize, F16AgreesWithC10HalfOnEveryBitPattern) {
  Bytes all;
  for (uint32_t bits = 0; bits < 65536; ++bits) all.u16(static_cast<uint16_t>(bits));
  std::vector<float> got = decode(GgmlType::F16, all.data(), 65536);
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float want = half_value(static_cast<uint16_t>(bits));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[bits])) << std::hex << bits;
    } else {
      ASSERT_EQ(std::memcmp(&got[bits], &want, 4), 0) << std::hex << bits << ": " << got[bits] << " vs " << want;
    }
  }
}

TEST_F(Dequantize, MatchesTheReferencePythonPackage) {
  std::ifstream in(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/gguf/quant_golden.json");
  ASSERT_TRUE(in) << "missing tests/data/gguf/quant_golden.json";
  nlohmann::json golden = nlohmann::json::parse(in);
  const std::pair<const char*, GgmlType> types[] = {
      {"Q4_0", GgmlType::Q4_0}, {"Q4_1", GgmlType::Q4_1}, {"Q8_0", GgmlType::Q8_0}, {"Q4_K", GgmlType::Q4_K},
      {"Q6_K", GgmlType::Q6_K}, {"F16", GgmlType::F16},   {"BF16", GgmlType::BF16}};
  for (const auto& [name, type] : types) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(golden.contains(name));
    const std::string hex = golden[name]["hex"];
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    std::vector<double> want = golden[name]["values"].get<std::vector<double>>();
    std::vector<float> got = decode(type, bytes, static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      // The reference computes in float32 too but may order operations differently.
      EXPECT_NEAR(got[i], want[i], 2e-6 * std::max(1.0, std::fabs(want[i]))) << name << "[" << i << "]";
    }
  }
}

TEST_F(Dequantize, ParallelRowsEqualSequentialBlocksAndRowRangesAreSlices) {
  // 300 rows x 512 Q4_K elements: 600 blocks of random (finite) content.
  const int64_t rows = 300, cols = 512, nblocks = rows * cols / 256;
  std::vector<uint8_t> data(static_cast<size_t>(nblocks) * 144);
  for (uint8_t& v : data) v = static_cast<uint8_t>(uniform(0, 255));
  for (int64_t b = 0; b < nblocks; ++b) {
    uint16_t d = half_bits(0.01f * static_cast<float>(uniform(1, 9)));
    std::memcpy(&data[b * 144], &d, 2);
    std::memcpy(&data[b * 144 + 2], &d, 2);
  }
  at::Tensor all = dequantize_rows(GgmlType::Q4_K, data.data(), rows, cols, "test");
  ASSERT_EQ(all.sizes(), (at::IntArrayRef{rows, cols}));
  std::vector<float> seq = decode(GgmlType::Q4_K, data, rows * cols);
  EXPECT_TRUE(at::equal(all.reshape({-1}), at::from_blob(seq.data(), {rows * cols}, at::kFloat)));
  // Rows 100..149 start 100 rows (2 blocks each) into the data.
  at::Tensor part = dequantize_rows(GgmlType::Q4_K, data.data() + 100 * 2 * 144, 50, cols, "test");
  EXPECT_TRUE(at::equal(part, all.narrow(0, 100, 50)));
}

TEST_F(Dequantize, UnsupportedTypesNameTheTypeAndTheTensor) {
  std::vector<uint8_t> zeros(256);
  EXPECT_FALSE(can_dequantize(GgmlType::IQ4_NL));
  EXPECT_TRUE(can_dequantize(GgmlType::Q6_K));
  EXPECT_TRUE(can_dequantize(GgmlType::Q5_0));
  testing::expect_load_error([&] { dequantize_rows(GgmlType::IQ4_NL, zeros.data(), 1, 32, "m.gguf: tensor 'w'"); },
                             {"m.gguf: tensor 'w'", "IQ4_NL", "cannot be dequantized"});
  testing::expect_load_error(
      [&] {
        std::vector<float> out(256);
        dequantize_blocks(GgmlType::IQ2_XXS, zeros.data(), out.data(), 256, "t");
      },
      {"IQ2_XXS"});
}

}  // namespace
}  // namespace nnsight
