// Hostile and broken GGUF files: each is a LoadError that names the file and
// the key or tensor at fault, never a crash, a huge allocation, or another
// exception type.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>

#include <nnsight/error.hpp>

#include "core/gguf/dequantize.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_weights.h"
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

constexpr uint64_t kHuge62 = 1ull << 62;

Bytes header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  Bytes b;
  b.u32(0x46554747).u32(version).u64(tensors).u64(kvs);
  return b;
}

class GgufBadFile : public ::testing::Test {
 protected:
  // Writes `bytes` and expects opening it to fail with the fragments (and the path).
  void expect_open_error(const Bytes& bytes, std::initializer_list<std::string> fragments) {
    const std::string path = dir_.file("bad.gguf");
    testing::write_file(path, bytes.data());
    expect_load_error([&] { GgufFile f(path); }, {path});
    expect_load_error([&] { GgufFile f(path); }, fragments);
  }
  ScratchDir dir_;
};

TEST_F(GgufBadFile, BadMagic) {
  Bytes b;
  b.raw({'G', 'G', 'U', 'X'}).u32(3).u64(0).u64(0);
  expect_open_error(b, {"not a GGUF file", "magic 'GGUX'"});
}

TEST_F(GgufBadFile, FileShorterThanTheMagic) {
  Bytes b;
  b.raw({'G', 'G'});
  expect_open_error(b, {"not a GGUF file", "2 bytes"});
}

TEST_F(GgufBadFile, EmptyFile) { expect_open_error(Bytes(), {"not a GGUF file"}); }

TEST_F(GgufBadFile, UnsupportedVersions) {
  expect_open_error(header(0, 0, 1), {"unsupported GGUF version 1"});
  expect_open_error(header(0, 0, 4), {"unsupported GGUF version 4"});
  expect_open_error(header(0, 0, 0x03000000), {"big-endian"});
}

TEST_F(GgufBadFile, TruncatedHeader) {
  Bytes b;
  b.u32(0x46554747).u32(3).u32(0);
  expect_open_error(b, {"truncated", "tensor count"});
}

TEST_F(GgufBadFile, TensorCountLargerThanTheFileCouldHold) {
  expect_open_error(header(1ull << 40, 0), {"tensor count 1099511627776", "cannot fit"});
}

TEST_F(GgufBadFile, MetadataCountLargerThanTheFileCouldHold) {
  expect_open_error(header(0, kHuge62), {"metadata count 4611686018427387904"});
}

TEST_F(GgufBadFile, HugeStringLengthInAValue) {
  Bytes b = header(0, 1);
  b.str("general.name").u32(kv::STRING).u64(kHuge62).raw({'a', 'b'});
  expect_open_error(b,
                    {"metadata key 'general.name'", "string length 4611686018427387904", "exceeds the 2 bytes left"});
}

TEST_F(GgufBadFile, HugeStringLengthInAKey) {
  Bytes b = header(0, 1);
  b.u64(kHuge62).raw({'k', 'e', 'y', 0, 0, 0, 0, 0, 0});
  expect_open_error(b, {"metadata entry #0 key", "string length 4611686018427387904"});
}

TEST_F(GgufBadFile, HugeArrayLength) {
  Bytes b = header(0, 1);
  b.str("tokenizer.ggml.tokens").u32(kv::ARRAY).u32(kv::STRING).u64(kHuge62).str("a");
  expect_open_error(b, {"metadata key 'tokenizer.ggml.tokens'", "array length 4611686018427387904", "cannot fit"});
}

TEST_F(GgufBadFile, HugeStringInsideAnArray) {
  Bytes b = header(0, 1);
  b.str("toks").u32(kv::ARRAY).u32(kv::STRING).u64(2).str("ok").u64(kHuge62).u64(0);
  expect_open_error(b, {"metadata key 'toks'[1]", "string length 4611686018427387904"});
}

TEST_F(GgufBadFile, ArraysNestedTooDeep) {
  Bytes b = header(0, 1);
  b.str("deep").u32(kv::ARRAY);
  for (int i = 0; i < 20; ++i) b.u32(kv::ARRAY).u64(1);
  b.u32(kv::U8).u64(0);
  expect_open_error(b, {"metadata key 'deep'", "nested deeper than 8"});
}

TEST_F(GgufBadFile, UnknownValueType) {
  Bytes b = header(0, 1);
  b.str("k").u32(13).u64(0);
  expect_open_error(b, {"metadata key 'k'", "unknown value type 13"});
}

TEST_F(GgufBadFile, UnknownArrayElementType) {
  Bytes b = header(0, 1);
  b.str("k").u32(kv::ARRAY).u32(77).u64(0);
  expect_open_error(b, {"metadata key 'k'", "unknown value type 77"});
}

TEST_F(GgufBadFile, BoolOtherThanZeroOrOne) {
  Bytes b = header(0, 1);
  b.str("flag").u32(kv::BOOL).u8(2);
  expect_open_error(b, {"metadata key 'flag'", "bool value 2"});
}

TEST_F(GgufBadFile, DuplicateKey) {
  Bytes b = header(0, 2);
  b.str("k").u32(kv::U8).u8(1).str("k").u32(kv::U8).u8(2);
  expect_open_error(b, {"duplicate metadata key 'k'"});
}

TEST_F(GgufBadFile, TruncatedMetadataValue) {
  Bytes b = header(0, 1);
  b.str("k").u32(kv::U64).u32(5);
  expect_open_error(b, {"truncated", "metadata key 'k'", "needs 8 bytes"});
}

TEST_F(GgufBadFile, AlignmentNotAPowerOfTwo) {
  Bytes b = header(0, 1);
  b.str("general.alignment").u32(kv::U32).u32(3);
  expect_open_error(b, {"general.alignment", "= 3", "power of two"});
}

TEST_F(GgufBadFile, AlignmentOfTheWrongType) {
  Bytes b = header(0, 1);
  b.str("general.alignment").u32(kv::STRING).str("32");
  expect_open_error(b, {"general.alignment", "has type string"});
}

// One tensor info by hand: name, dims, type, offset.
Bytes one_tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                 size_t data_bytes) {
  Bytes b = header(1, 0);
  b.str(name).u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) b.u64(d);
  b.u32(type).u64(offset);
  b.pad_to(32).zeros(data_bytes);
  return b;
}

TEST_F(GgufBadFile, UnknownGgmlType) {
  expect_open_error(one_tensor("blk.0.attn_q.weight", {4}, 99, 0, 16),
                    {"tensor 'blk.0.attn_q.weight'", "unknown ggml type 99"});
}

TEST_F(GgufBadFile, TooManyDimensions) {
  expect_open_error(one_tensor("t", {1, 1, 1, 1, 1}, ggml::F32, 0, 4), {"tensor 't'", "5 dimensions"});
  expect_open_error(one_tensor("t", {}, ggml::F32, 0, 4), {"tensor 't'", "0 dimensions"});
}

TEST_F(GgufBadFile, DimensionsWhoseProductOverflows) {
  expect_open_error(one_tensor("big", {1ull << 32, 1ull << 32}, ggml::F32, 0, 4), {"tensor 'big'", "overflow"});
  expect_open_error(one_tensor("neg", {1ull << 63}, ggml::F32, 0, 4), {"tensor 'neg'", "overflow"});
  // The element count fits but the byte count does not.
  expect_open_error(one_tensor("bytes", {1ull << 31, 1ull << 31}, ggml::F32, 0, 4), {"tensor 'bytes'", "byte size"});
}

TEST_F(GgufBadFile, OneGigabyteTensorInATinyFile) {
  expect_open_error(one_tensor("token_embd.weight", {1ull << 28}, ggml::F32, 0, 64),
                    {"tensor 'token_embd.weight'", "extends past the end", "1073741824 bytes"});
}

TEST_F(GgufBadFile, TensorOffsetPastTheEnd) {
  expect_open_error(one_tensor("w", {8}, ggml::F32, 1ull << 40, 32),
                    {"tensor 'w'", "1099511627776", "extends past the end"});
  // offset + size wrapping around 2^64 is caught too.
  expect_open_error(one_tensor("w", {8}, ggml::F32, ~uint64_t{31}, 32), {"tensor 'w'", "extends past"});
}

TEST_F(GgufBadFile, MisalignedTensorOffset) {
  expect_open_error(one_tensor("w", {8}, ggml::F32, 4, 64), {"tensor 'w'", "offset 4", "alignment 32"});
}

TEST_F(GgufBadFile, InnerDimensionNotAWholeNumberOfBlocks) {
  expect_open_error(one_tensor("q", {31}, ggml::Q8_0, 0, 64), {"tensor 'q'", "Q8_0", "block size 32"});
}

TEST_F(GgufBadFile, TruncatedTensorData) {
  const std::string path = dir_.file("trunc.gguf");
  std::vector<float> v(64, 1.0f);
  std::vector<uint8_t> bytes = GgufWriter().tensor_f32("a", {64}, v).tensor_f32("b", {64}, v).bytes();
  bytes.resize(bytes.size() - 1);
  testing::write_file(path, bytes);
  expect_load_error([&] { GgufFile f(path); }, {path, "tensor 'b'", "extends past the end"});
}

TEST_F(GgufBadFile, OverlappingTensors) {
  Bytes b = header(2, 0);
  b.str("first").u32(1).u64(16).u32(ggml::F32).u64(0);
  b.str("second").u32(1).u64(16).u32(ggml::F32).u64(32);
  b.pad_to(32).zeros(128);
  expect_open_error(b, {"tensor 'first'", "overlaps tensor 'second'"});
}

TEST_F(GgufBadFile, DuplicateTensorName) {
  Bytes b = header(2, 0);
  b.str("w").u32(1).u64(8).u32(ggml::F32).u64(0);
  b.str("w").u32(1).u64(8).u32(ggml::F32).u64(32);
  b.pad_to(32).zeros(64);
  expect_open_error(b, {"duplicate tensor 'w'"});
}

TEST_F(GgufBadFile, DequantizingAnUnsupportedTypeNamesIt) {
  const std::string path = dir_.file("q2k.gguf");
  GgufWriter().tensor_raw("blk.0.ffn_up.weight", {256}, 10, std::vector<uint8_t>(84, 0)).write(path);
  GgufFile f(path);  // opening is fine: Q2_K's size is known
  expect_load_error([&] { f.dequantize(f.tensor("blk.0.ffn_up.weight")); },
                    {path, "tensor 'blk.0.ffn_up.weight'", "Q2_K", "cannot be dequantized"});
}

// A small but complete llama file to corrupt.
std::vector<uint8_t> tiny_llama_bytes() {
  GgufWriter w;
  w.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", 64)
      .kv_u32("llama.feed_forward_length", 64)
      .kv_u32("llama.attention.head_count", 2)
      .kv_u32("llama.attention.head_count_kv", 1)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_string("tokenizer.ggml.model", "gpt2")
      .kv_strings("tokenizer.ggml.tokens", {"a", "b", "c", "d"})
      .kv_i32s("tokenizer.ggml.token_type", {1, 1, 1, 3})
      .kv_strings("tokenizer.ggml.merges", {"a b"})
      .kv_u32("tokenizer.ggml.bos_token_id", 3);
  at::manual_seed(3);
  w.tensor("token_embd.weight", at::randn({4, 64}), ggml::Q8_0);
  w.tensor("blk.0.attn_q.weight", at::randn({64, 64}), ggml::F16);
  w.tensor("blk.0.attn_k.weight", at::randn({32, 64}), ggml::Q8_0);
  w.tensor("blk.0.attn_norm.weight", at::randn({64}));
  w.tensor_raw("blk.0.ffn_down.weight", {256, 1}, ggml::Q4_K, std::vector<uint8_t>(144, 0x21));
  return w.bytes();
}

// Opens the file as both a GgufFile and a GgufWeights and reads everything
// it offers; returns normally or throws.
void exercise(const std::string& path) {
  GgufFile f(path);
  for (const GgufTensorInfo& t : f.tensors()) {
    if (can_dequantize(t.type)) f.dequantize(t);
  }
  for (const std::string& key : f.keys()) (void)f.at(key).to_string();
  GgufWeights w(path);
  for (const std::string& n : w.names()) {
    w.load(n);
    if (w.shape(n).size() == 2 && w.shape(n)[0] > 1) w.load(n, ShardSlice::rows(1, 1));
  }
  (void)w.tokenizer_spec();
}

TEST_F(GgufBadFile, EveryTruncationAndRandomCorruptionIsALoadErrorOrLoads) {
  const std::vector<uint8_t> good = tiny_llama_bytes();
  const std::string path = dir_.file("fuzz.gguf");
  int other_errors = 0;
  auto run = [&](const std::vector<uint8_t>& bytes, const std::string& label) {
    testing::write_file(path, bytes);
    try {
      exercise(path);
    } catch (const LoadError&) {
    } catch (const std::exception& e) {
      if (++other_errors <= 5) ADD_FAILURE() << label << ": non-LoadError escaped: " << e.what();
    } catch (...) {
      if (++other_errors <= 5) ADD_FAILURE() << label << ": unknown exception escaped";
    }
  };
  // The intact file loads (tokenizer too) without any error.
  testing::write_file(path, good);
  ASSERT_NO_THROW(exercise(path));
  const size_t data_start = GgufFile(path).data_offset();
  int truncated_ok = 0;
  // Every length through the metadata and tensor directory and near the end,
  // every 7th through the tensor data (whose prefixes fail the same check).
  for (size_t len = 0; len < good.size(); len += (len < data_start + 64 || len + 64 > good.size()) ? 1 : 7) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len));
    testing::write_file(path, cut);
    try {
      GgufFile f(path);
      ++truncated_ok;
    } catch (const LoadError&) {
    }
    run(cut, "truncated to " + std::to_string(len));
  }
  // The last tensor's data reaches the end of the file, so no prefix is valid.
  EXPECT_EQ(truncated_ok, 0);
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<uint8_t> bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      size_t pos = rng() % bad.size();
      // Bias towards the header, where lengths and counts live.
      if (rng() % 2 == 0) pos %= 1024;
      bad[pos] = static_cast<uint8_t>(rng() % 3 == 0 ? 0xFF : rng());
    }
    run(bad, "corruption #" + std::to_string(iter));
  }
  EXPECT_EQ(other_errors, 0);
}

}  // namespace
}  // namespace nnsight
