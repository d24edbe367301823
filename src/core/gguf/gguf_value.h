// GgufValue: one typed GGUF metadata value (any scalar type, a string, or an
// array of any of them, arrays nested to any depth). Accessors check the type
// and throw LoadError("<what> has type T, expected U"), where `what` is the
// caller's description of the value ("model.gguf: metadata key 'x'").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {

// On-disk ids of GGUF metadata value types.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// True for the ids listed above.
bool gguf_value_type_known(uint32_t raw_type);
// "u8", "i32", "f32", "bool", "string", "array", ...
const char* gguf_value_type_name(GgufValueType type);
// Bytes of one scalar on disk; 0 for string and array.
size_t gguf_scalar_size(GgufValueType type);

class GgufValue {
 public:
  GgufValue() = default;

  // A numeric or bool scalar from its little-endian bits, zero-extended.
  static GgufValue scalar(GgufValueType type, uint64_t bits);
  static GgufValue string(std::string text);
  // An array of numeric/bool scalars, `raw` holding count * scalar size bytes.
  static GgufValue scalar_array(GgufValueType element, uint64_t count, std::vector<uint8_t> raw);
  static GgufValue string_array(std::vector<std::string> items);
  // An array whose elements are themselves arrays.
  static GgufValue nested_array(std::vector<GgufValue> items);

  GgufValueType type() const { return type_; }
  bool is_array() const { return type_ == GgufValueType::kArray; }
  // Arrays only: the element type.
  GgufValueType element_type() const { return element_; }
  // "u32", "string", "array<i32>", "array<array<f32>>" (from the first element).
  std::string type_name() const;
  // Arrays only: element count (0 for scalars).
  uint64_t size() const { return count_; }
  // Arrays only: element i as a value of its own.
  GgufValue element(uint64_t i, const std::string& what) const;

  // Any integer type whose value fits.
  int64_t as_int(const std::string& what) const;
  // Any integer type with a non-negative value.
  uint64_t as_uint(const std::string& what) const;
  // f32, f64, or any integer type.
  double as_float(const std::string& what) const;
  bool as_bool(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  const std::vector<std::string>& as_string_array(const std::string& what) const;
  // Arrays of any integer type.
  std::vector<int64_t> as_int_array(const std::string& what) const;
  // Arrays of f32, f64 or integers.
  std::vector<double> as_float_array(const std::string& what) const;

  // Short human-readable rendering (arrays show their first elements).
  std::string to_string() const;

 private:
  [[noreturn]] void type_error(const std::string& what, const char* expected) const;
  // Scalar element i of a scalar array as raw bits, zero-extended.
  uint64_t raw_element(uint64_t i) const;

  GgufValueType type_ = GgufValueType::kUint8;
  GgufValueType element_ = GgufValueType::kUint8;
  uint64_t bits_ = 0;                 // scalars
  uint64_t count_ = 0;                // arrays
  std::string text_;                  // string
  std::vector<uint8_t> raw_;          // array of numeric scalars, as on disk
  std::vector<std::string> strings_;  // array of strings
  std::vector<GgufValue> arrays_;     // array of arrays
};

}  // namespace nnsight
