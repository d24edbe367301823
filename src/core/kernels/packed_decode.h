// Portable reference decoders of the ggml block encodings the packed kernels
// take (see packed_matrix.h). Internal to src/core (the GGUF loader's
// dequantizer and the packed kernels share them, so both give the same
// floats). Each decodes `nblocks` whole blocks from `src` to `dst`.
//
// Every value is computed with the float operations written here, in this
// order (a multiply, then an add or subtract; never fused): the vector
// decoders repeat exactly these operations, so their results are bitwise
// equal.
#pragma once

#include <cstdint>
#include <cstring>

namespace nnsight::kernels::detail {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// IEEE binary16 -> binary32 (exact), written out here rather than borrowed
// from c10, whose half-precision helpers moved between LibTorch releases.
inline float half_to_float(const uint8_t* p) {
  const uint32_t h = load_u16(p);
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf / NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign != 0 ? -magnitude : magnitude;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The (scale, min) pair of sub-block j (0..7) from the 12 packed bytes of a
// Q4_K / Q5_K super-block (ggml's get_scale_min_k4).
inline void k_scale_min(const uint8_t* sm, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = sm[j] & 63;
    *min = sm[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((sm[j + 4] & 0x0F) | ((sm[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((sm[j + 4] >> 4) | ((sm[j] >> 6) << 4));
  }
}

void decode_q4_0(const uint8_t* src, float* dst, int64_t nblocks);
void decode_q4_1(const uint8_t* src, float* dst, int64_t nblocks);
void decode_q5_0(const uint8_t* src, float* dst, int64_t nblocks);
void decode_q5_1(const uint8_t* src, float* dst, int64_t nblocks);
void decode_q8_0(const uint8_t* src, float* dst, int64_t nblocks);
void decode_q4_k(const uint8_t* src, float* dst, int64_t nblocks);
void decode_q5_k(const uint8_t* src, float* dst, int64_t nblocks);
void decode_q6_k(const uint8_t* src, float* dst, int64_t nblocks);

}  // namespace nnsight::kernels::detail
