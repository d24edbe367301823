// Test-side GGUF writer: builds GGUF v2/v3 files (metadata of any type,
// tensors of any ggml type as raw blocks, plus F32/F16/Q8_0 encoders) so
// tests can round-trip data through the reader, and a little-endian byte
// builder for hand-made malformed files. Written from the format
// description, independently of the library's reader.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {
namespace testing {

// GGUF metadata value type ids.
namespace gguf_kv {
constexpr uint32_t U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
                   U64 = 10, I64 = 11, F64 = 12;
}
// ggml tensor type ids.
namespace ggml {
constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, Q4_K = 12, Q6_K = 14, BF16 = 30;
}

class Bytes {
 public:
  Bytes& u8(uint8_t v) { return put(&v, 1); }
  Bytes& u16(uint16_t v) { return put(&v, 2); }
  Bytes& u32(uint32_t v) { return put(&v, 4); }
  Bytes& u64(uint64_t v) { return put(&v, 8); }
  Bytes& i8(int8_t v) { return put(&v, 1); }
  Bytes& i16(int16_t v) { return put(&v, 2); }
  Bytes& i32(int32_t v) { return put(&v, 4); }
  Bytes& i64(int64_t v) { return put(&v, 8); }
  Bytes& f32(float v) { return put(&v, 4); }
  Bytes& f64(double v) { return put(&v, 8); }
  // u64 length, then the bytes.
  Bytes& str(const std::string& s) { return u64(s.size()).put(s.data(), s.size()); }
  Bytes& raw(const std::vector<uint8_t>& v) { return put(v.data(), v.size()); }
  Bytes& zeros(size_t n) {
    data_.resize(data_.size() + n, 0);
    return *this;
  }
  Bytes& pad_to(size_t alignment) { return zeros((alignment - data_.size() % alignment) % alignment); }
  Bytes& put(const void* p, size_t n);

  const std::vector<uint8_t>& data() const { return data_; }
  std::vector<uint8_t>& data() { return data_; }
  size_t size() const { return data_.size(); }

 private:
  std::vector<uint8_t> data_;
};

// f32 -> IEEE half bits (round to nearest even) and back, via c10::Half.
uint16_t half_bits(float x);
float half_value(uint16_t bits);

// Q8_0 blocks for `x` (length a multiple of 32): d = amax / 127 rounded to
// f16, q = round(x / d).
std::vector<uint8_t> quantize_q8_0(const std::vector<float>& x);

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // Also adds the general.alignment key (u32).
  GgufWriter& alignment(uint32_t a);

  // A metadata entry whose value bytes (after the type id) the caller encoded.
  GgufWriter& kv_raw(const std::string& key, uint32_t type, const std::vector<uint8_t>& value);
  GgufWriter& kv_u8(const std::string& k, uint8_t v);
  GgufWriter& kv_i8(const std::string& k, int8_t v);
  GgufWriter& kv_u16(const std::string& k, uint16_t v);
  GgufWriter& kv_i16(const std::string& k, int16_t v);
  GgufWriter& kv_u32(const std::string& k, uint32_t v);
  GgufWriter& kv_i32(const std::string& k, int32_t v);
  GgufWriter& kv_u64(const std::string& k, uint64_t v);
  GgufWriter& kv_i64(const std::string& k, int64_t v);
  GgufWriter& kv_f32(const std::string& k, float v);
  GgufWriter& kv_f64(const std::string& k, double v);
  GgufWriter& kv_bool(const std::string& k, bool v);
  GgufWriter& kv_string(const std::string& k, const std::string& v);
  GgufWriter& kv_strings(const std::string& k, const std::vector<std::string>& v);
  GgufWriter& kv_i32s(const std::string& k, const std::vector<int32_t>& v);
  GgufWriter& kv_f32s(const std::string& k, const std::vector<float>& v);

  // dims in GGUF order (dims[0] innermost); `data` is the encoded blocks.
  GgufWriter& tensor_raw(const std::string& name, const std::vector<int64_t>& dims, uint32_t type,
                         const std::vector<uint8_t>& data);
  GgufWriter& tensor_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  GgufWriter& tensor_f16(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  GgufWriter& tensor_q8_0(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  // A float tensor in PyTorch order, encoded as F32, F16 or Q8_0.
  GgufWriter& tensor(const std::string& name, const at::Tensor& t, uint32_t type = ggml::F32);

  std::vector<uint8_t> bytes() const;
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t type;
    std::vector<uint8_t> data;
  };
  uint32_t version_;
  uint32_t alignment_ = 32;
  uint64_t kv_count_ = 0;
  Bytes kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace testing
}  // namespace nnsight
