// GgufFile: metadata of every type and tensors written by the test-side
// writer read back unchanged; typed accessors reject the wrong type by name.
#include "core/gguf/gguf_file.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>

#include <nnsight/error.hpp>

#include "support/expect_load_error.h"
#include "support/gguf_writer.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using testing::Bytes;
using testing::expect_load_error;
using testing::GgufWriter;
using testing::ScratchDir;
namespace kv = testing::gguf_kv;
namespace ggml = testing::ggml;

TEST(GgufFile, ScalarMetadataOfEveryTypeRoundTrips) {
  ScratchDir dir;
  const std::string path = dir.file("m.gguf");
  GgufWriter()
      .kv_u8("a.u8", 200)
      .kv_i8("a.i8", -100)
      .kv_u16("a.u16", 60000)
      .kv_i16("a.i16", -30000)
      .kv_u32("a.u32", 4000000000u)
      .kv_i32("a.i32", -2000000000)
      .kv_u64("a.u64", 18000000000000000000ull)
      .kv_i64("a.i64", -9000000000000000000ll)
      .kv_f32("a.f32", 1.5f)
      .kv_f64("a.f64", -2.25e300)
      .kv_bool("a.yes", true)
      .kv_bool("a.no", false)
      .kv_string("a.str", std::string("h\xC3\xA9llo\0x", 8))
      .write(path);
  GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.keys().size(), 13u);
  EXPECT_EQ(f.keys().front(), "a.u8");
  EXPECT_EQ(f.at("a.u8").type(), GgufValueType::kUint8);
  EXPECT_EQ(f.get_int("a.u8"), 200);
  EXPECT_EQ(f.get_int("a.i8"), -100);
  EXPECT_EQ(f.get_int("a.u16"), 60000);
  EXPECT_EQ(f.get_int("a.i16"), -30000);
  EXPECT_EQ(f.get_uint("a.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("a.i32"), -2000000000);
  EXPECT_EQ(f.get_uint("a.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get_int("a.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_float("a.f32"), 1.5);
  EXPECT_EQ(f.get_float("a.f64"), -2.25e300);
  EXPECT_TRUE(f.get_bool("a.yes"));
  EXPECT_FALSE(f.get_bool("a.no"));
  EXPECT_EQ(f.get_string("a.str"), std::string("h\xC3\xA9llo\0x", 8));
  EXPECT_EQ(f.at("a.f64").type_name(), "f64");
  // Fallbacks apply only to missing keys.
  EXPECT_EQ(f.get_int_or("a.missing", 7), 7);
  EXPECT_EQ(f.get_int_or("a.u8", 7), 200);
  EXPECT_EQ(f.get_string_or("a.missing", "x"), "x");
}

TEST(GgufFile, ArraysIncludingNestedArraysRoundTrip) {
  ScratchDir dir;
  const std::string path = dir.file("a.gguf");
  // [[1, 2], [3]] of u16, and an empty array of f64, hand-encoded.
  Bytes nested;
  nested.u32(kv::ARRAY).u64(2);
  nested.u32(kv::U16).u64(2).u16(1).u16(2);
  nested.u32(kv::U16).u64(1).u16(3);
  Bytes empty;
  empty.u32(kv::F64).u64(0);
  Bytes u64s;
  u64s.u32(kv::U64).u64(2).u64(5).u64(1ull << 63);
  Bytes bools;
  bools.u32(kv::BOOL).u64(3).u8(1).u8(0).u8(1);
  GgufWriter()
      .kv_strings("s", {"a", "", "Ġthe"})
      .kv_i32s("i", {-1, 0, 2147483647})
      .kv_f32s("f", {0.5f, -3.0f})
      .kv_raw("nested", kv::ARRAY, nested.data())
      .kv_raw("empty", kv::ARRAY, empty.data())
      .kv_raw("u64s", kv::ARRAY, u64s.data())
      .kv_raw("bools", kv::ARRAY, bools.data())
      .write(path);
  GgufFile f(path);
  const std::string w = "ctx";
  EXPECT_EQ(f.at("s").as_string_array(w), (std::vector<std::string>{"a", "", "Ġthe"}));
  EXPECT_EQ(f.at("s").type_name(), "array<string>");
  EXPECT_EQ(f.at("i").as_int_array(w), (std::vector<int64_t>{-1, 0, 2147483647}));
  EXPECT_EQ(f.at("f").as_float_array(w), (std::vector<double>{0.5, -3.0}));
  const GgufValue& n = f.at("nested");
  EXPECT_EQ(n.element_type(), GgufValueType::kArray);
  EXPECT_EQ(n.type_name(), "array<array<u16>>");
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n.element(0, w).as_int_array(w), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n.element(1, w).as_int_array(w), (std::vector<int64_t>{3}));
  EXPECT_EQ(n.element(1, w).element(0, w).as_int(w), 3);
  EXPECT_EQ(f.at("empty").size(), 0u);
  EXPECT_EQ(f.at("empty").element_type(), GgufValueType::kFloat64);
  EXPECT_EQ(f.at("u64s").element(1, w).as_uint(w), 1ull << 63);
  // 2^63 does not fit an int64: a clear error rather than a wrapped value.
  expect_load_error([&] { f.at("u64s").as_int_array(w); }, {"ctx[1]", "does not fit"});
  EXPECT_TRUE(f.at("bools").element(0, w).as_bool(w));
  EXPECT_FALSE(f.at("bools").element(1, w).as_bool(w));
  expect_load_error([&] { n.element(2, w); }, {"index 2", "2 elements"});
}

TEST(GgufFile, AccessorsNameTheFileKeyAndBothTypes) {
  ScratchDir dir;
  const std::string path = dir.file("t.gguf");
  GgufWriter().kv_f32("x.eps", 1e-5f).kv_string("x.name", "n").kv_i32("x.neg", -3).write(path);
  GgufFile f(path);
  expect_load_error([&] { f.get_int("x.eps"); }, {path, "metadata key 'x.eps'", "has type f32", "expected an integer"});
  expect_load_error([&] { f.get_string("x.eps"); }, {"x.eps", "type f32, expected string"});
  expect_load_error([&] { f.get_bool("x.name"); }, {"x.name", "type string, expected bool"});
  expect_load_error([&] { f.get_uint("x.neg"); }, {"x.neg", "-3", "negative"});
  expect_load_error([&] { f.get_int("x.missing"); }, {path, "missing metadata key 'x.missing'"});
  expect_load_error([&] { f.at("x.name").as_string_array(f.describe_key("x.name")); },
                    {"x.name", "expected array<string>"});
  // Integers widen to float.
  EXPECT_EQ(f.get_float("x.neg"), -3.0);
}

TEST(GgufFile, TensorsRoundTripWithDimsTypesOffsetsAndData) {
  ScratchDir dir;
  const std::string path = dir.file("w.gguf");
  std::vector<float> a(2 * 3 * 4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.25f - 3.0f;
  std::vector<float> h = {1.0f, -2.0f, 0.5f, 65504.0f, -0.0f, 3.140625f, 1024.0f, -1e-3f};
  std::vector<uint8_t> raw(18 * 2);  // two Q4_0 blocks of bytes 0..35
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>(i);
  GgufWriter()
      .kv_string("general.architecture", "test")
      .tensor_f32("a", {4, 3, 2}, a)
      .tensor_f16("h", {8}, h)
      .tensor_raw("q", {32, 2}, ggml::Q4_0, raw)
      .write(path);
  GgufFile f(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  const GgufTensorInfo& ta = f.tensor("a");
  EXPECT_EQ(ta.dims, (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(ta.torch_shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(ta.type, GgmlType::F32);
  EXPECT_EQ(ta.numel, 24);
  EXPECT_EQ(ta.nbytes, 96u);
  EXPECT_EQ(ta.rows(), 6);
  EXPECT_EQ(ta.offset, 0u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  const GgufTensorInfo& th = f.tensor("h");
  EXPECT_EQ(th.offset, 96u);  // 96 is already 32-aligned
  const GgufTensorInfo& tq = f.tensor("q");
  EXPECT_EQ(tq.type, GgmlType::Q4_0);
  EXPECT_EQ(tq.nbytes, 36u);
  EXPECT_EQ(tq.row_bytes(), 18u);
  EXPECT_EQ(tq.offset, 128u);  // 96 + 16 bytes, rounded up to 32
  EXPECT_EQ(std::memcmp(f.tensor_data(tq), raw.data(), raw.size()), 0);

  at::Tensor da = f.dequantize(ta);
  ASSERT_EQ(da.sizes(), (at::IntArrayRef{2, 3, 4}));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(da.reshape({-1})[i].item<float>(), a[i]);
  at::Tensor dh = f.dequantize(th);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(dh[i].item<float>(), testing::half_value(testing::half_bits(h[i])));
  // Row ranges match the same rows of the whole tensor.
  at::Tensor rows = f.dequantize_rows(ta, 2, 3);
  EXPECT_TRUE(at::equal(rows, da.reshape({6, 4}).narrow(0, 2, 3)));
  expect_load_error([&] { f.dequantize_rows(ta, 4, 3); }, {path, "tensor 'a'", "outside its 6 rows"});
  expect_load_error([&] { f.tensor("nope"); }, {path, "no tensor 'nope'"});
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(GgufFile, VersionTwoAndCustomAlignmentAreHonoured) {
  ScratchDir dir;
  const std::string path = dir.file("v2.gguf");
  std::vector<float> x = {1, 2, 3};
  GgufWriter(2).alignment(64).tensor_f32("x", {3}, x).tensor_f32("y", {3}, x).write(path);
  GgufFile f(path);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("y").offset, 64u);
  EXPECT_EQ(f.dequantize(f.tensor("y"))[2].item<float>(), 3.0f);
}

TEST(GgufFile, FileWithoutTensorsOrMetadataOpens) {
  ScratchDir dir;
  const std::string path = dir.file("empty.gguf");
  GgufWriter().write(path);
  GgufFile f(path);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.keys().empty());
}

}  // namespace
}  // namespace nnsight
