#include "support/gguf_writer.h"

#include <ATen/ATen.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "support/scratch_dir.h"

namespace nnsight {
namespace testing {

Bytes& Bytes::put(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  data_.insert(data_.end(), b, b + n);
  return *this;
}

uint16_t half_bits(float x) { return c10::Half(x).x; }

float half_value(uint16_t bits) { return static_cast<float>(c10::Half(bits, c10::Half::from_bits())); }

std::vector<uint8_t> quantize_q8_0(const std::vector<float>& x) {
  if (x.size() % 32 != 0) throw std::invalid_argument("quantize_q8_0: length not a multiple of 32");
  Bytes out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    uint16_t dbits = half_bits(amax / 127.0f);
    float d = half_value(dbits);
    out.u16(dbits);
    for (size_t j = 0; j < 32; ++j) {
      long q = d == 0 ? 0 : std::lround(x[b + j] / d);
      out.i8(static_cast<int8_t>(std::max(-127L, std::min(127L, q))));
    }
  }
  return out.data();
}

GgufWriter& GgufWriter::alignment(uint32_t a) {
  alignment_ = a;
  return kv_u32("general.alignment", a);
}

GgufWriter& GgufWriter::kv_raw(const std::string& key, uint32_t type, const std::vector<uint8_t>& value) {
  kv_.str(key).u32(type).raw(value);
  ++kv_count_;
  return *this;
}

GgufWriter& GgufWriter::kv_u8(const std::string& k, uint8_t v) { return kv_raw(k, gguf_kv::U8, Bytes().u8(v).data()); }
GgufWriter& GgufWriter::kv_i8(const std::string& k, int8_t v) { return kv_raw(k, gguf_kv::I8, Bytes().i8(v).data()); }
GgufWriter& GgufWriter::kv_u16(const std::string& k, uint16_t v) {
  return kv_raw(k, gguf_kv::U16, Bytes().u16(v).data());
}
GgufWriter& GgufWriter::kv_i16(const std::string& k, int16_t v) {
  return kv_raw(k, gguf_kv::I16, Bytes().i16(v).data());
}
GgufWriter& GgufWriter::kv_u32(const std::string& k, uint32_t v) {
  return kv_raw(k, gguf_kv::U32, Bytes().u32(v).data());
}
GgufWriter& GgufWriter::kv_i32(const std::string& k, int32_t v) {
  return kv_raw(k, gguf_kv::I32, Bytes().i32(v).data());
}
GgufWriter& GgufWriter::kv_u64(const std::string& k, uint64_t v) {
  return kv_raw(k, gguf_kv::U64, Bytes().u64(v).data());
}
GgufWriter& GgufWriter::kv_i64(const std::string& k, int64_t v) {
  return kv_raw(k, gguf_kv::I64, Bytes().i64(v).data());
}
GgufWriter& GgufWriter::kv_f32(const std::string& k, float v) { return kv_raw(k, gguf_kv::F32, Bytes().f32(v).data()); }
GgufWriter& GgufWriter::kv_f64(const std::string& k, double v) {
  return kv_raw(k, gguf_kv::F64, Bytes().f64(v).data());
}
GgufWriter& GgufWriter::kv_bool(const std::string& k, bool v) {
  return kv_raw(k, gguf_kv::BOOL, Bytes().u8(v ? 1 : 0).data());
}
GgufWriter& GgufWriter::kv_string(const std::string& k, const std::string& v) {
  return kv_raw(k, gguf_kv::STRING, Bytes().str(v).data());
}

GgufWriter& GgufWriter::kv_strings(const std::string& k, const std::vector<std::string>& v) {
  Bytes b;
  b.u32(gguf_kv::STRING).u64(v.size());
  for (const std::string& s : v) b.str(s);
  return kv_raw(k, gguf_kv::ARRAY, b.data());
}

GgufWriter& GgufWriter::kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
  Bytes b;
  b.u32(gguf_kv::I32).u64(v.size());
  for (int32_t x : v) b.i32(x);
  return kv_raw(k, gguf_kv::ARRAY, b.data());
}

GgufWriter& GgufWriter::kv_f32s(const std::string& k, const std::vector<float>& v) {
  Bytes b;
  b.u32(gguf_kv::F32).u64(v.size());
  for (float x : v) b.f32(x);
  return kv_raw(k, gguf_kv::ARRAY, b.data());
}

GgufWriter& GgufWriter::tensor_raw(const std::string& name, const std::vector<int64_t>& dims, uint32_t type,
                                   const std::vector<uint8_t>& data) {
  tensors_.push_back({name, dims, type, data});
  return *this;
}

GgufWriter& GgufWriter::tensor_f32(const std::string& name, const std::vector<int64_t>& dims,
                                   const std::vector<float>& values) {
  Bytes b;
  for (float v : values) b.f32(v);
  return tensor_raw(name, dims, ggml::F32, b.data());
}

GgufWriter& GgufWriter::tensor_f16(const std::string& name, const std::vector<int64_t>& dims,
                                   const std::vector<float>& values) {
  Bytes b;
  for (float v : values) b.u16(half_bits(v));
  return tensor_raw(name, dims, ggml::F16, b.data());
}

GgufWriter& GgufWriter::tensor_q8_0(const std::string& name, const std::vector<int64_t>& dims,
                                    const std::vector<float>& values) {
  return tensor_raw(name, dims, ggml::Q8_0, quantize_q8_0(values));
}

GgufWriter& GgufWriter::tensor(const std::string& name, const at::Tensor& t, uint32_t type) {
  at::Tensor c = t.to(at::kFloat).contiguous();
  std::vector<float> values(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  std::vector<int64_t> dims(c.sizes().rbegin(), c.sizes().rend());
  switch (type) {
    case ggml::F32:
      return tensor_f32(name, dims, values);
    case ggml::F16:
      return tensor_f16(name, dims, values);
    case ggml::Q8_0:
      return tensor_q8_0(name, dims, values);
    default:
      throw std::invalid_argument("GgufWriter::tensor: use tensor_raw for this type");
  }
}

std::vector<uint8_t> GgufWriter::bytes() const {
  Bytes out;
  out.u32(0x46554747).u32(version_).u64(tensors_.size()).u64(kv_count_).raw(kv_.data());
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    out.str(t.name).u32(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) out.u64(static_cast<uint64_t>(d));
    out.u32(t.type).u64(offset);
    offsets.push_back(offset);
    offset += t.data.size();
    offset = (offset + alignment_ - 1) / alignment_ * alignment_;
  }
  out.pad_to(alignment_);
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.zeros(data_start + offsets[i] - out.size());
    out.raw(tensors_[i].data);
  }
  return out.data();
}

void GgufWriter::write(const std::string& path) const { write_file(path, bytes()); }

}  // namespace testing
}  // namespace nnsight
