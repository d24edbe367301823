#include "dsl/dtype.h"

#include <array>

namespace nnsight::dsl {
namespace {

struct DtypeEntry {
  uint8_t code;
  at::ScalarType type;
  const char* name;
};

// The wire codes. Append only: a code, once shipped, keeps its meaning.
constexpr std::array<DtypeEntry, 12> kDtypes = {{
    {1, at::kBool, "bool"},
    {2, at::kByte, "uint8"},
    {3, at::kChar, "int8"},
    {4, at::kShort, "int16"},
    {5, at::kInt, "int32"},
    {6, at::kLong, "int64"},
    {7, at::kHalf, "float16"},
    {8, at::kBFloat16, "bfloat16"},
    {9, at::kFloat, "float32"},
    {10, at::kDouble, "float64"},
    {11, at::kComplexFloat, "complex64"},
    {12, at::kComplexDouble, "complex128"},
}};

}  // namespace

std::optional<uint8_t> dtype_code(at::ScalarType t) {
  for (const auto& e : kDtypes)
    if (e.type == t) return e.code;
  return std::nullopt;
}

std::optional<at::ScalarType> dtype_from_code(uint8_t code) {
  for (const auto& e : kDtypes)
    if (e.code == code) return e.type;
  return std::nullopt;
}

std::string dtype_name(at::ScalarType t) {
  for (const auto& e : kDtypes)
    if (e.type == t) return e.name;
  return std::string("unsupported(") + c10::toString(t) + ")";
}

std::optional<at::ScalarType> dtype_from_name(std::string_view name) {
  for (const auto& e : kDtypes)
    if (name == e.name) return e.type;
  if (name == "float") return at::kFloat;
  if (name == "double") return at::kDouble;
  if (name == "half") return at::kHalf;
  if (name == "long") return at::kLong;
  if (name == "int") return at::kInt;
  return std::nullopt;
}

size_t dtype_size(at::ScalarType t) { return c10::elementSize(t); }

}  // namespace nnsight::dsl
