#include "core/gguf/gguf_file.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include <nnsight/error.hpp>

#include "core/gguf/dequantize.h"

namespace nnsight {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;              // ggml's GGML_MAX_DIMS
// Smallest encodings, used to bound counts by the bytes left in the file.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, 1 dim, type, offset

uint32_t byteswap32(uint32_t v) { return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24); }

// Bounds-checked little-endian reads over the mapped header.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& file) : data_(data), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    size_t at = pos_;
    uint64_t len = read<uint64_t>(what + " (string length)");
    if (len > left()) {
      throw LoadError(file_ + ": " + what + ": string length " + std::to_string(len) + " at offset " +
                      std::to_string(at) + " exceeds the " + std::to_string(left()) + " bytes left in the file");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  std::vector<uint8_t> read_bytes(uint64_t n, const std::string& what) {
    need(n, what);
    std::vector<uint8_t> out(data_ + pos_, data_ + pos_ + n);
    pos_ += static_cast<size_t>(n);
    return out;
  }

 private:
  void need(uint64_t n, const std::string& what) {
    if (n > left()) {
      throw LoadError(file_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                      std::to_string(pos_) + " but the file has " + std::to_string(left()) + " left");
    }
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
};

// Smallest on-disk size of one array element of this type.
uint64_t min_element_bytes(GgufValueType t) {
  if (t == GgufValueType::kString) return 8;     // length only
  if (t == GgufValueType::kArray) return 4 + 8;  // element type + count
  return gguf_scalar_size(t);
}

GgufValue read_value(Cursor& in, GgufValueType type, const std::string& what, const std::string& file, int depth);

GgufValueType read_type(Cursor& in, const std::string& what, const std::string& file) {
  size_t at = in.pos();
  uint32_t raw = in.read<uint32_t>(what + " (value type)");
  if (!gguf_value_type_known(raw)) {
    throw LoadError(file + ": " + what + ": unknown value type " + std::to_string(raw) + " at offset " +
                    std::to_string(at));
  }
  return static_cast<GgufValueType>(raw);
}

GgufValue read_array(Cursor& in, const std::string& what, const std::string& file, int depth) {
  if (depth >= GgufFile::kMaxArrayDepth) {
    throw LoadError(file + ": " + what + ": arrays nested deeper than " + std::to_string(GgufFile::kMaxArrayDepth) +
                    " levels");
  }
  GgufValueType element = read_type(in, what + " (array element type)", file);
  size_t at = in.pos();
  uint64_t count = in.read<uint64_t>(what + " (array length)");
  uint64_t min_bytes = min_element_bytes(element);
  if (count > in.left() / min_bytes) {
    throw LoadError(file + ": " + what + ": array length " + std::to_string(count) + " at offset " +
                    std::to_string(at) + " cannot fit in the " + std::to_string(in.left()) + " bytes left in the file");
  }
  if (element == GgufValueType::kString) {
    std::vector<std::string> items;
    items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      items.push_back(in.read_string(what + "[" + std::to_string(i) + "]"));
    }
    return GgufValue::string_array(std::move(items));
  }
  if (element == GgufValueType::kArray) {
    std::vector<GgufValue> items;
    items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      items.push_back(read_value(in, GgufValueType::kArray, what + "[" + std::to_string(i) + "]", file, depth + 1));
    }
    return GgufValue::nested_array(std::move(items));
  }
  std::vector<uint8_t> raw = in.read_bytes(count * min_bytes, what + " (array data)");
  if (element == GgufValueType::kBool) {
    for (uint64_t i = 0; i < count; ++i) {
      if (raw[i] > 1) {
        throw LoadError(file + ": " + what + "[" + std::to_string(i) + "]: bool value " + std::to_string(raw[i]) +
                        " is neither 0 nor 1");
      }
    }
  }
  return GgufValue::scalar_array(element, count, std::move(raw));
}

GgufValue read_value(Cursor& in, GgufValueType type, const std::string& what, const std::string& file, int depth) {
  switch (type) {
    case GgufValueType::kString:
      return GgufValue::string(in.read_string(what));
    case GgufValueType::kArray:
      return read_array(in, what, file, depth);
    case GgufValueType::kBool: {
      uint8_t b = in.read<uint8_t>(what);
      if (b > 1) {
        throw LoadError(file + ": " + what + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
      }
      return GgufValue::scalar(type, b);
    }
    default: {
      size_t n = gguf_scalar_size(type);
      uint64_t bits = 0;
      std::vector<uint8_t> raw = in.read_bytes(n, what);
      std::memcpy(&bits, raw.data(), n);
      return GgufValue::scalar(type, bits);
    }
  }
}

std::string dims_string(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) { parse(); }

void GgufFile::parse() {
  const std::string& file = path();
  Cursor in(file_->data(), file_->size(), file);
  if (file_->size() < 4) {
    throw LoadError(file + ": not a GGUF file (" + std::to_string(file_->size()) + " bytes, too short for the magic)");
  }
  uint32_t magic = in.read<uint32_t>("magic");
  if (magic != kMagic) {
    char shown[5] = {0, 0, 0, 0, 0};
    std::memcpy(shown, &magic, 4);
    for (char& c : shown) {
      if (c != 0 && (c < 32 || c > 126)) c = '?';
    }
    throw LoadError(file + ": not a GGUF file (magic '" + std::string(shown) + "', expected 'GGUF')");
  }
  version_ = in.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    uint32_t swapped = byteswap32(version_);
    if (swapped == 2 || swapped == 3) {
      throw LoadError(file + ": big-endian GGUF files are not supported");
    }
    throw LoadError(file + ": unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  }
  uint64_t tensor_count = in.read<uint64_t>("tensor count");
  uint64_t kv_count = in.read<uint64_t>("metadata count");
  if (kv_count > in.left() / kMinKvBytes) {
    throw LoadError(file + ": metadata count " + std::to_string(kv_count) + " cannot fit in the " +
                    std::to_string(in.left()) + " bytes left in the file");
  }
  if (tensor_count > in.left() / kMinTensorInfoBytes) {
    throw LoadError(file + ": tensor count " + std::to_string(tensor_count) + " cannot fit in the " +
                    std::to_string(in.left()) + " bytes left in the file");
  }

  // ---- metadata ----
  keys_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string("metadata entry #" + std::to_string(i) + " key");
    std::string what = "metadata key '" + key + "'";
    GgufValueType type = read_type(in, what, file);
    GgufValue value = read_value(in, type, what, file, 0);
    if (!metadata_.emplace(key, std::move(value)).second) {
      throw LoadError(file + ": duplicate " + what);
    }
    keys_.push_back(std::move(key));
  }
  if (const GgufValue* a = find("general.alignment")) {
    uint64_t align = a->as_uint(describe_key("general.alignment"));
    if (align == 0 || (align & (align - 1)) != 0 || align > (1u << 20)) {
      throw LoadError(describe_key("general.alignment") + " = " + std::to_string(align) +
                      " is not a power of two up to 1 MiB");
    }
    alignment_ = align;
  }

  // ---- tensor directory ----
  tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    t.name = in.read_string("tensor #" + std::to_string(i) + " name");
    std::string what = "tensor '" + t.name + "'";
    uint32_t n_dims = in.read<uint32_t>(what + " dimension count");
    if (n_dims < 1 || n_dims > kMaxDims) {
      throw LoadError(file + ": " + what + " has " + std::to_string(n_dims) + " dimensions (expected 1 to " +
                      std::to_string(kMaxDims) + ")");
    }
    std::vector<uint64_t> raw_dims;
    for (uint32_t d = 0; d < n_dims; ++d) {
      raw_dims.push_back(in.read<uint64_t>(what + " dimension " + std::to_string(d)));
    }
    uint32_t raw_type = in.read<uint32_t>(what + " type");
    t.offset = in.read<uint64_t>(what + " offset");

    const GgmlTypeTraits* traits = ggml_type_traits(raw_type);
    if (traits == nullptr) {
      throw LoadError(file + ": " + what + " has unknown ggml type " + std::to_string(raw_type));
    }
    t.type = static_cast<GgmlType>(raw_type);
    int64_t numel = 1;
    for (uint64_t d : raw_dims) {
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, static_cast<int64_t>(d), &numel)) {
        throw LoadError(file + ": " + what + " dimensions " + dims_string(raw_dims) +
                        " overflow a 64-bit element count");
      }
      t.dims.push_back(static_cast<int64_t>(d));
    }
    t.numel = numel;
    if (t.dims[0] % traits->block_size != 0) {
      throw LoadError(file + ": " + what + " of type " + traits->name + " has innermost dimension " +
                      std::to_string(t.dims[0]) + ", not a multiple of the block size " +
                      std::to_string(traits->block_size));
    }
    int64_t nbytes = 0;
    if (__builtin_mul_overflow(numel / traits->block_size, traits->block_bytes, &nbytes)) {
      throw LoadError(file + ": " + what + " dimensions " + dims_string(raw_dims) + " overflow a 64-bit byte size");
    }
    t.nbytes = static_cast<uint64_t>(nbytes);
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      throw LoadError(file + ": duplicate " + what);
    }
    tensors_.push_back(std::move(t));
  }

  // ---- data section ----
  uint64_t header_end = in.pos();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  uint64_t data_size = file_->size() > data_offset_ ? file_->size() - data_offset_ : 0;
  for (const GgufTensorInfo& t : tensors_) {
    std::string what = "tensor '" + t.name + "'";
    if (t.offset % alignment_ != 0) {
      throw LoadError(file + ": " + what + " data offset " + std::to_string(t.offset) +
                      " is not a multiple of the alignment " + std::to_string(alignment_));
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      throw LoadError(file + ": " + what + " data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                      " bytes) extends past the end of the data section (" + std::to_string(data_size) +
                      " bytes; file truncated or offset corrupt)");
    }
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* prev = by_offset[i - 1];
    const GgufTensorInfo* cur = by_offset[i];
    if (prev->nbytes > 0 && cur->nbytes > 0 && prev->offset + prev->nbytes > cur->offset) {
      throw LoadError(file + ": tensor '" + prev->name + "' data [" + std::to_string(prev->offset) + ", " +
                      std::to_string(prev->offset + prev->nbytes) + ") overlaps tensor '" + cur->name +
                      "' starting at " + std::to_string(cur->offset));
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::at(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw LoadError(path() + ": missing metadata key '" + key + "'");
  return *v;
}

std::string GgufFile::describe_key(const std::string& key) const { return path() + ": metadata key '" + key + "'"; }

std::string GgufFile::get_string(const std::string& key) const { return at(key).as_string(describe_key(key)); }
int64_t GgufFile::get_int(const std::string& key) const { return at(key).as_int(describe_key(key)); }
uint64_t GgufFile::get_uint(const std::string& key) const { return at(key).as_uint(describe_key(key)); }
double GgufFile::get_float(const std::string& key) const { return at(key).as_float(describe_key(key)); }
bool GgufFile::get_bool(const std::string& key) const { return at(key).as_bool(describe_key(key)); }

std::string GgufFile::get_string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float_or(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool_or(const std::string& key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (t == nullptr) throw LoadError(path() + ": no tensor '" + name + "'");
  return *t;
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& info) const {
  return file_->data() + data_offset_ + info.offset;
}

at::Tensor GgufFile::dequantize_rows(const GgufTensorInfo& info, int64_t row_start, int64_t row_count) const {
  if (row_start < 0 || row_count < 0 || row_start > info.rows() || row_count > info.rows() - row_start) {
    throw LoadError(path() + ": tensor '" + info.name + "': rows [" + std::to_string(row_start) + ", +" +
                    std::to_string(row_count) + ") outside its " + std::to_string(info.rows()) + " rows");
  }
  const uint8_t* src = tensor_data(info) + static_cast<uint64_t>(row_start) * info.row_bytes();
  return nnsight::dequantize_rows(info.type, src, row_count, info.row_length(),
                                  path() + ": tensor '" + info.name + "'");
}

at::Tensor GgufFile::dequantize(const GgufTensorInfo& info) const {
  return dequantize_rows(info, 0, info.rows()).view(info.torch_shape());
}

}  // namespace nnsight
