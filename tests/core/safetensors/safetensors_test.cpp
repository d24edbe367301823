// SafetensorsFile and write_safetensors: round trips of every dtype, a file
// written by the reference Python package, row reads, and malformed headers
// (each a LoadError naming the file and the tensor).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_file.h"
#include "core/safetensors/safetensors_writer.h"
#include "support/expect_load_error.h"
#include "support/gguf_writer.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using testing::Bytes;
using testing::expect_load_error;
using testing::ScratchDir;

// A file with the given header text and `data_bytes` zero bytes of data.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  Bytes b;
  b.u64(header.size()).put(header.data(), header.size()).zeros(data_bytes);
  testing::write_file(path, b.data());
}

TEST(Safetensors, EveryDtypeRoundTripsWithMetadata) {
  ScratchDir dir;
  at::manual_seed(1);
  std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"f64", at::randn({2, 3}, at::kDouble)},
      {"f32", at::randn({4, 5})},
      {"f16", at::randn({3, 1, 2}).to(at::kHalf)},
      {"bf16", at::randn({7}).to(at::kBFloat16)},
      {"i64", at::randint(-(1LL << 40), 1LL << 40, {3}, at::kLong)},
      {"i32", at::randint(-100000, 100000, {2, 2}, at::kInt)},
      {"i16", at::randint(-30000, 30000, {5}, at::kShort)},
      {"i8", at::randint(-128, 127, {6}, at::kChar)},
      {"u8", at::randint(0, 255, {6}, at::kByte)},
      {"bool", at::randint(0, 2, {4}).to(at::kBool)},
      {"scalar", at::scalar_tensor(2.5, at::kFloat)},
      {"empty", at::zeros({0, 4})},
      {"strided", at::randn({4, 6}).t()},  // non-contiguous input
  };
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors, {{"step", "3"}, {"what", "activations"}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"step", "3"}, {"what", "activations"}}));
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    at::Tensor got = f.load(name);
    EXPECT_EQ(got.scalar_type(), t.scalar_type());
    EXPECT_EQ(got.sizes(), t.sizes());
    EXPECT_TRUE(at::equal(got, t));
  }
  EXPECT_EQ(f.info("bf16").dtype_name, "BF16");
  EXPECT_EQ(f.info("strided").shape, (std::vector<int64_t>{6, 4}));
  // The data section starts 8-byte aligned.
  std::vector<uint8_t> bytes = testing::read_file_bytes(path);
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

TEST(Safetensors, ReadsAFileWrittenByThePythonPackage) {
  SafetensorsFile f(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/safetensors/python_written.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "np");
  EXPECT_EQ(f.metadata().at("source"), "make_python_written.py");
  EXPECT_TRUE(at::equal(f.load("f64"), (at::arange(6, at::kDouble) * 0.5 - 1).reshape({2, 3})));
  EXPECT_TRUE(at::equal(f.load("f32"), at::arange(4, at::kFloat).pow(2) / 8));
  EXPECT_TRUE(at::equal(f.load("f16"), (at::arange(6, at::kFloat) - 2.5).reshape({3, 2}).to(at::kHalf)));
  at::Tensor i64 = f.load("i64");
  EXPECT_EQ(i64[0].item<int64_t>(), -(1LL << 40));
  EXPECT_EQ(i64[1].item<int64_t>(), (1LL << 40) + 7);
  at::Tensor i32 = f.load("i32");
  EXPECT_EQ(i32[2].item<int32_t>(), 2147483647);
  EXPECT_EQ(i32[0].item<int32_t>(), -7);
  EXPECT_EQ(f.load("i16")[0][0].item<int16_t>(), -300);
  EXPECT_TRUE(at::equal(f.load("i8"), at::arange(5, at::kChar) - 2));
  at::Tensor u8 = f.load("u8");
  EXPECT_EQ(u8[2].item<uint8_t>(), 128);
  EXPECT_EQ(u8[3].item<uint8_t>(), 255);
  at::Tensor b = f.load("bool");
  EXPECT_EQ(b.scalar_type(), at::kBool);
  EXPECT_TRUE(b[0].item<bool>());
  EXPECT_FALSE(b[1].item<bool>());
  EXPECT_EQ(f.load("empty").sizes(), (at::IntArrayRef{0, 3}));
  EXPECT_EQ(f.load("scalar").dim(), 0);
  EXPECT_EQ(f.load("scalar").item<float>(), 3.5f);
}

TEST(Safetensors, LoadRowsReadsOnlyThoseRows) {
  ScratchDir dir;
  at::Tensor t = at::randn({10, 3, 4}).to(at::kBFloat16);
  write_safetensors(dir.file("r.safetensors"), {{"w", t}});
  SafetensorsFile f(dir.file("r.safetensors"));
  EXPECT_TRUE(at::equal(f.load_rows("w", 3, 4), t.narrow(0, 3, 4)));
  EXPECT_EQ(f.load_rows("w", 10, 0).size(0), 0);
  expect_load_error([&] { f.load_rows("w", 8, 3); }, {dir.file("r.safetensors"), "tensor 'w'", "out of range"});
  expect_load_error([&] { f.load("nope"); }, {dir.file("r.safetensors"), "no tensor 'nope'"});
}

TEST(Safetensors, WriterRejectsWhatTheFormatCannotHold) {
  ScratchDir dir;
  const std::string p = dir.file("w.safetensors");
  EXPECT_THROW(write_safetensors(p, {{"c", at::zeros({2}, at::kComplexFloat)}}), Error);
  EXPECT_THROW(write_safetensors(p, {{"a", at::zeros({2})}, {"a", at::zeros({2})}}), Error);
  EXPECT_THROW(write_safetensors(p, {{"__metadata__", at::zeros({2})}}), Error);
  EXPECT_THROW(write_safetensors(dir.file("no/such/dir/x.safetensors"), {{"a", at::zeros({2})}}), Error);
  try {
    write_safetensors(p, {{"c", at::zeros({2}, at::kComplexFloat)}});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'c'"), std::string::npos) << e.what();
  }
}

class SafetensorsBadFile : public ::testing::Test {
 protected:
  void expect_error(const std::string& header, size_t data_bytes, std::initializer_list<std::string> fragments) {
    const std::string path = dir_.file("bad.safetensors");
    write_raw(path, header, data_bytes);
    expect_load_error([&] { SafetensorsFile f(path); }, {path});
    expect_load_error([&] { SafetensorsFile f(path); }, fragments);
  }
  ScratchDir dir_;
};

TEST_F(SafetensorsBadFile, TooShortForTheLength) {
  const std::string path = dir_.file("short.safetensors");
  testing::write_file(path, std::string("abc"));
  expect_load_error([&] { SafetensorsFile f(path); }, {path, "3 bytes"});
}

TEST_F(SafetensorsBadFile, HeaderLengthPastTheEnd) {
  const std::string path = dir_.file("len.safetensors");
  Bytes b;
  b.u64(1ull << 62).put("{}", 2);
  testing::write_file(path, b.data());
  expect_load_error([&] { SafetensorsFile f(path); }, {path, "header length 4611686018427387904", "past the end"});
}

TEST_F(SafetensorsBadFile, HeaderNotJson) {
  expect_error("{\"a\": [1, 2", 0, {"header", "not valid JSON"});
  expect_error("[1, 2]", 0, {"not a JSON object"});
  expect_error(std::string(1000, '[') + std::string(1000, ']'), 0, {"nests deeper than 64"});
}

TEST_F(SafetensorsBadFile, OffsetsOutsideTheDataSection) {
  expect_error(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8,
               {"tensor 'w'", "[0, 16]", "outside the data section (8 bytes)"});
  expect_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 18446744073709551616]}})",
               8, {"tensor 'w'", "data_offsets"});
}

TEST_F(SafetensorsBadFile, LengthDisagreesWithDtypeAndShape) {
  expect_error(R"({"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 24]}})", 24,
               {"tensor 'w'", "hold 24 bytes", "F16", "[2, 3]", "needs 12"});
}

TEST_F(SafetensorsBadFile, BadFields) {
  expect_error(R"({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})", 1,
               {"tensor 'w'", "dtype 'F8_E4M3' is not supported"});
  expect_error(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, {"tensor 'w'", "shape [-1]"});
  expect_error(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4,
               {"tensor 'w'", "shape"});
  expect_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4, {"tensor 'w'", "begin <= end"});
  expect_error(R"({"w": {"dtype": "F32", "shape": [1]}})", 4, {"tensor 'w'", "data_offsets"});
  expect_error(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4, {"tensor 'w'", "dtype"});
  expect_error(R"({"w": 3})", 0, {"tensor 'w'", "not a JSON object"});
  expect_error(R"({"__metadata__": {"a": 1}})", 0, {"__metadata__", "'a'", "not a string"});
}

TEST_F(SafetensorsBadFile, OverlappingTensors) {
  expect_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
               12, {"tensor 'a'", "overlaps tensor 'b'"});
}

}  // namespace
}  // namespace nnsight
