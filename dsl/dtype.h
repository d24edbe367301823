// Tensor element types as the graph encodes them: a stable one-byte code for
// the binary form and a name for the JSON form ("float32", "bfloat16", ...).
// The codes never change meaning; new types get new codes.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nnsight::dsl {

// Stable wire code of a dtype, or nullopt for a type graphs cannot carry.
std::optional<uint8_t> dtype_code(at::ScalarType t);
// Inverse of dtype_code; nullopt for an unknown code.
std::optional<at::ScalarType> dtype_from_code(uint8_t code);
// "float32", "int64", ... (the names numpy and PyTorch users know).
std::string dtype_name(at::ScalarType t);
// Inverse of dtype_name; also accepts the aliases "float", "double", "half",
// "long", "int". nullopt for an unknown name.
std::optional<at::ScalarType> dtype_from_name(std::string_view name);
// Bytes per element.
size_t dtype_size(at::ScalarType t);

}  // namespace nnsight::dsl
