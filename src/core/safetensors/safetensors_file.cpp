#include "core/safetensors/safetensors_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

#include <nnsight/error.hpp>

#include "core/untrusted_json.h"
#include "core/shape_string.h"

namespace nnsight {
namespace {

struct Dtype {
  const char* name;
  at::ScalarType type;
  uint64_t size;
};

constexpr Dtype kDtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2},  {"BF16", at::kBFloat16, 2},
    {"I64", at::kLong, 8},   {"I32", at::kInt, 4},   {"I16", at::kShort, 2}, {"I8", at::kChar, 1},
    {"U8", at::kByte, 1},    {"BOOL", at::kBool, 1},
};

const Dtype* dtype_by_name(const std::string& name) {
  for (const Dtype& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

uint64_t element_size(at::ScalarType t) {
  for (const Dtype& d : kDtypes) {
    if (d.type == t) return d.size;
  }
  return 0;
}

// A non-negative JSON integer, or nullopt-like false.
bool as_u64(const nlohmann::json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

const char* safetensors_dtype_name(at::ScalarType type) {
  for (const Dtype& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return nullptr;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) { parse(); }

SafetensorsFile::SafetensorsFile(const std::string& name, std::string bytes)
    : file_(std::make_shared<MappedFile>(name, std::move(bytes))) {
  parse();
}

void SafetensorsFile::parse() {
  const std::string& file = path();
  const uint64_t size = file_->size();
  if (size < 8) {
    throw LoadError(file + ": not a safetensors file (" + std::to_string(size) +
                    " bytes, too short for the header length)");
  }
  uint64_t header_len;
  std::memcpy(&header_len, file_->data(), 8);
  if (header_len > size - 8) {
    throw LoadError(file + ": header length " + std::to_string(header_len) + " extends past the end of the file (" +
                    std::to_string(size) + " bytes)");
  }
  if (header_len > kMaxHeaderBytes) {
    throw LoadError(file + ": header length " + std::to_string(header_len) + " exceeds the " +
                    std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  data_offset_ = 8 + header_len;
  const uint64_t data_size = size - data_offset_;
  nlohmann::json header = parse_untrusted_json(reinterpret_cast<const char*>(file_->data() + 8),
                                               static_cast<size_t>(header_len), file + ": header");
  if (!header.is_object()) throw LoadError(file + ": header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw LoadError(file + ": __metadata__ is not a JSON object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          throw LoadError(file + ": __metadata__ entry '" + m.key() + "' is not a string");
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = file + ": tensor '" + name + "'";
    if (!v.is_object()) throw LoadError(what + ": entry is not a JSON object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) throw LoadError(what + ": missing or non-string 'dtype'");
    if (sh == v.end() || !sh->is_array()) throw LoadError(what + ": missing or non-array 'shape'");
    if (off == v.end() || !off->is_array() || off->size() != 2) {
      throw LoadError(what + ": 'data_offsets' is not an array [begin, end]");
    }
    SafetensorsTensorInfo t;
    t.name = name;
    t.dtype_name = dt->get<std::string>();
    const Dtype* dtype = dtype_by_name(t.dtype_name);
    if (dtype == nullptr) {
      throw LoadError(what + ": dtype '" + t.dtype_name +
                      "' is not supported (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
    }
    t.dtype = dtype->type;
    int64_t numel = 1;
    for (const nlohmann::json& d : *sh) {
      uint64_t dim;
      if (!as_u64(d, dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, static_cast<int64_t>(dim), &numel)) {
        throw LoadError(what + ": shape " + sh->dump() +
                        " is not a list of non-negative integers with a 64-bit element count");
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    t.numel = numel;
    uint64_t nbytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel), dtype->size, &nbytes)) {
      throw LoadError(what + ": shape " + shape_string(t.shape) + " overflows a 64-bit byte size");
    }
    if (!as_u64((*off)[0], t.begin) || !as_u64((*off)[1], t.end) || t.begin > t.end) {
      throw LoadError(what + ": data_offsets " + off->dump() +
                      " are not non-negative integers [begin, end] with begin <= end");
    }
    if (t.end > data_size) {
      throw LoadError(what + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                      "] lie outside the data section (" + std::to_string(data_size) + " bytes)");
    }
    if (t.end - t.begin != nbytes) {
      throw LoadError(what + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] hold " +
                      std::to_string(t.end - t.begin) + " bytes but dtype " + t.dtype_name + " with shape " +
                      shape_string(t.shape) + " needs " + std::to_string(nbytes));
    }
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (i > 0 && tensors_[i - 1].end > tensors_[i].begin && tensors_[i].begin < tensors_[i].end) {
      throw LoadError(file + ": tensor '" + tensors_[i - 1].name + "' data [" + std::to_string(tensors_[i - 1].begin) +
                      ", " + std::to_string(tensors_[i - 1].end) + ") overlaps tensor '" + tensors_[i].name + "' [" +
                      std::to_string(tensors_[i].begin) + ", " + std::to_string(tensors_[i].end) + ")");
    }
    index_.emplace(tensors_[i].name, i);
  }
}

const SafetensorsTensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
  const SafetensorsTensorInfo* t = find(name);
  if (t == nullptr) throw LoadError(path() + ": no tensor '" + name + "'");
  return *t;
}

at::Tensor SafetensorsFile::load(const std::string& name) const {
  const SafetensorsTensorInfo& t = info(name);
  at::Tensor out = at::empty(t.shape, at::TensorOptions().dtype(t.dtype));
  // Copied rather than wrapped: offsets in the file need not be aligned for the dtype.
  if (t.end > t.begin) {
    std::memcpy(out.data_ptr(), file_->data() + data_offset_ + t.begin, t.end - t.begin);
  }
  return out;
}

at::Tensor SafetensorsFile::load_rows(const std::string& name, int64_t start, int64_t length) const {
  const SafetensorsTensorInfo& t = info(name);
  if (t.shape.empty() || start < 0 || length < 0 || start > t.shape[0] || length > t.shape[0] - start) {
    throw LoadError(path() + ": tensor '" + name + "' of shape " + shape_string(t.shape) + ": rows [" +
                    std::to_string(start) + ", +" + std::to_string(length) + ") are out of range");
  }
  std::vector<int64_t> shape = t.shape;
  shape[0] = length;
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(t.dtype));
  const uint64_t row_bytes = t.shape[0] == 0 ? 0 : static_cast<uint64_t>(t.numel / t.shape[0]) * element_size(t.dtype);
  if (length > 0 && row_bytes > 0) {
    std::memcpy(out.data_ptr(), file_->data() + data_offset_ + t.begin + static_cast<uint64_t>(start) * row_bytes,
                static_cast<size_t>(length) * row_bytes);
  }
  return out;
}

}  // namespace nnsight
