#include "core/gguf/gguf_value.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

bool is_signed(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}

// Sign-extends the zero-extended bits of a signed scalar.
int64_t signed_value(GgufValueType t, uint64_t bits) {
  switch (t) {
    case GgufValueType::kInt8:
      return static_cast<int8_t>(bits);
    case GgufValueType::kInt16:
      return static_cast<int16_t>(bits);
    case GgufValueType::kInt32:
      return static_cast<int32_t>(bits);
    default:
      return static_cast<int64_t>(bits);
  }
}

double float_value(GgufValueType t, uint64_t bits) {
  if (t == GgufValueType::kFloat32) {
    uint32_t b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

// Integer value as int64, or an error when it does not fit.
int64_t int_of(GgufValueType t, uint64_t bits, const std::string& what) {
  if (is_signed(t)) return signed_value(t, bits);
  if (bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw LoadError(what + " = " + std::to_string(bits) + " does not fit in a signed 64-bit integer");
  }
  return static_cast<int64_t>(bits);
}

std::string scalar_to_string(GgufValueType t, uint64_t bits) {
  if (t == GgufValueType::kBool) return bits ? "true" : "false";
  if (t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64) {
    std::ostringstream os;
    os << float_value(t, bits);
    return os.str();
  }
  if (is_signed(t)) return std::to_string(signed_value(t, bits));
  return std::to_string(bits);
}

}  // namespace

bool gguf_value_type_known(uint32_t raw_type) { return raw_type <= 12; }

const char* gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "u8";
    case GgufValueType::kInt8:
      return "i8";
    case GgufValueType::kUint16:
      return "u16";
    case GgufValueType::kInt16:
      return "i16";
    case GgufValueType::kUint32:
      return "u32";
    case GgufValueType::kInt32:
      return "i32";
    case GgufValueType::kFloat32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "u64";
    case GgufValueType::kInt64:
      return "i64";
    case GgufValueType::kFloat64:
      return "f64";
  }
  return "unknown";
}

size_t gguf_scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

GgufValue GgufValue::scalar(GgufValueType type, uint64_t bits) {
  TORCH_CHECK(gguf_scalar_size(type) > 0, "GgufValue::scalar: not a scalar type");
  GgufValue v;
  v.type_ = type;
  v.bits_ = bits;
  return v;
}

GgufValue GgufValue::string(std::string text) {
  GgufValue v;
  v.type_ = GgufValueType::kString;
  v.text_ = std::move(text);
  return v;
}

GgufValue GgufValue::scalar_array(GgufValueType element, uint64_t count, std::vector<uint8_t> raw) {
  TORCH_CHECK(gguf_scalar_size(element) > 0, "GgufValue::scalar_array: not a scalar type");
  TORCH_CHECK(raw.size() == count * gguf_scalar_size(element), "GgufValue::scalar_array: size");
  GgufValue v;
  v.type_ = GgufValueType::kArray;
  v.element_ = element;
  v.count_ = count;
  v.raw_ = std::move(raw);
  return v;
}

GgufValue GgufValue::string_array(std::vector<std::string> items) {
  GgufValue v;
  v.type_ = GgufValueType::kArray;
  v.element_ = GgufValueType::kString;
  v.count_ = items.size();
  v.strings_ = std::move(items);
  return v;
}

GgufValue GgufValue::nested_array(std::vector<GgufValue> items) {
  GgufValue v;
  v.type_ = GgufValueType::kArray;
  v.element_ = GgufValueType::kArray;
  v.count_ = items.size();
  v.arrays_ = std::move(items);
  return v;
}

std::string GgufValue::type_name() const {
  if (!is_array()) return gguf_value_type_name(type_);
  if (element_ == GgufValueType::kArray) {
    return "array<" + (arrays_.empty() ? std::string("array") : arrays_.front().type_name()) + ">";
  }
  return std::string("array<") + gguf_value_type_name(element_) + ">";
}

void GgufValue::type_error(const std::string& what, const char* expected) const {
  throw LoadError(what + " has type " + type_name() + ", expected " + expected);
}

uint64_t GgufValue::raw_element(uint64_t i) const {
  size_t n = gguf_scalar_size(element_);
  uint64_t bits = 0;
  std::memcpy(&bits, raw_.data() + i * n, n);  // little-endian host
  return bits;
}

GgufValue GgufValue::element(uint64_t i, const std::string& what) const {
  if (!is_array()) type_error(what, "an array");
  if (i >= count_) {
    throw LoadError(what + ": index " + std::to_string(i) + " is past the array's " + std::to_string(count_) +
                    " elements");
  }
  if (element_ == GgufValueType::kString) return string(strings_[i]);
  if (element_ == GgufValueType::kArray) return arrays_[i];
  return scalar(element_, raw_element(i));
}

int64_t GgufValue::as_int(const std::string& what) const {
  if (!is_integer(type_)) type_error(what, "an integer");
  return int_of(type_, bits_, what);
}

uint64_t GgufValue::as_uint(const std::string& what) const {
  if (!is_integer(type_)) type_error(what, "an unsigned integer");
  if (is_signed(type_)) {
    int64_t v = signed_value(type_, bits_);
    if (v < 0) throw LoadError(what + " = " + std::to_string(v) + " is negative");
    return static_cast<uint64_t>(v);
  }
  return bits_;
}

double GgufValue::as_float(const std::string& what) const {
  if (type_ == GgufValueType::kFloat32 || type_ == GgufValueType::kFloat64) {
    return float_value(type_, bits_);
  }
  if (is_integer(type_)) {
    return is_signed(type_) ? static_cast<double>(signed_value(type_, bits_)) : static_cast<double>(bits_);
  }
  type_error(what, "a number");
}

bool GgufValue::as_bool(const std::string& what) const {
  if (type_ != GgufValueType::kBool) type_error(what, "bool");
  return bits_ != 0;
}

const std::string& GgufValue::as_string(const std::string& what) const {
  if (type_ != GgufValueType::kString) type_error(what, "string");
  return text_;
}

const std::vector<std::string>& GgufValue::as_string_array(const std::string& what) const {
  if (!is_array() || element_ != GgufValueType::kString) type_error(what, "array<string>");
  return strings_;
}

std::vector<int64_t> GgufValue::as_int_array(const std::string& what) const {
  if (!is_array() || !is_integer(element_)) type_error(what, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    out.push_back(int_of(element_, raw_element(i), what + "[" + std::to_string(i) + "]"));
  }
  return out;
}

std::vector<double> GgufValue::as_float_array(const std::string& what) const {
  bool numeric = is_array() &&
                 (is_integer(element_) || element_ == GgufValueType::kFloat32 || element_ == GgufValueType::kFloat64);
  if (!numeric) type_error(what, "an array of numbers");
  std::vector<double> out;
  out.reserve(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    out.push_back(scalar(element_, raw_element(i)).as_float(what));
  }
  return out;
}

std::string GgufValue::to_string() const {
  if (type_ == GgufValueType::kString) return "\"" + text_ + "\"";
  if (!is_array()) return scalar_to_string(type_, bits_);
  constexpr uint64_t kShown = 8;
  std::string out = "[";
  for (uint64_t i = 0; i < count_ && i < kShown; ++i) {
    if (i > 0) out += ", ";
    if (element_ == GgufValueType::kString) {
      out += "\"" + strings_[i] + "\"";
    } else if (element_ == GgufValueType::kArray) {
      out += arrays_[i].to_string();
    } else {
      out += scalar_to_string(element_, raw_element(i));
    }
  }
  if (count_ > kShown) out += ", ... (" + std::to_string(count_) + " elements)";
  return out + "]";
}

}  // namespace nnsight
