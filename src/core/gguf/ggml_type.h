// GgmlType: the tensor element encodings a GGUF file can declare, with their
// block geometry (elements per block, bytes per block) so a reader can size
// any tensor, whether or not it can dequantize it.
#pragma once

#include <cstdint>
#include <string>

namespace nnsight {

// Values are the on-disk ids (ggml's enum ggml_type); gaps are ids ggml removed.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name;     // as ggml spells it: "Q4_K"
  int64_t block_size;   // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
};

// Traits of a raw on-disk type id; nullptr when the id is unknown.
const GgmlTypeTraits* ggml_type_traits(uint32_t raw_type);
// Traits of a known type (never null).
const GgmlTypeTraits& ggml_traits(GgmlType type);
// "Q4_K", or "unknown(<id>)".
std::string ggml_type_name(uint32_t raw_type);
inline std::string ggml_type_name(GgmlType type) { return ggml_type_name(static_cast<uint32_t>(type)); }

}  // namespace nnsight
