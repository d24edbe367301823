#include "core/gguf/dequantize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstring>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// IEEE binary16 -> binary32, written out here rather than borrowed from c10,
// whose half-precision helpers moved between LibTorch releases.
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

// Each decoder handles `nblocks` whole blocks.

void decode_f32(const uint8_t* src, float* dst, int64_t nblocks) {
  std::memcpy(dst, src, static_cast<size_t>(nblocks) * 4);
}

void decode_f16(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t i = 0; i < nblocks; ++i) dst[i] = half_to_float(src + 2 * i);
}

void decode_bf16(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t i = 0; i < nblocks; ++i) {
    uint32_t bits = static_cast<uint32_t>(load_u16(src + 2 * i)) << 16;  // bf16 = high half of f32
    std::memcpy(dst + i, &bits, 4);
  }
}

// Q8_0 block (34 bytes): f16 scale d, 32 x int8 q; x = d * q.
void decode_q8_0(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 34, dst += 32) {
    const float d = half_to_float(src);
    const int8_t* q = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < 32; ++j) dst[j] = d * static_cast<float>(q[j]);
  }
}

// Q4_0 block (18 bytes): f16 d, 16 bytes of nibbles; element j < 16 is the low
// nibble of byte j, element j + 16 its high nibble; x = d * (nibble - 8).
void decode_q4_0(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 18, dst += 32) {
    const float d = half_to_float(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(static_cast<int>(qs[j] & 0x0F) - 8);
      dst[j + 16] = d * static_cast<float>(static_cast<int>(qs[j] >> 4) - 8);
    }
  }
}

// Q4_1 block (20 bytes): f16 d, f16 min m, 16 bytes of nibbles laid out as in
// Q4_0; x = d * nibble + m.
void decode_q4_1(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 20, dst += 32) {
    const float d = half_to_float(src);
    const float m = half_to_float(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
      dst[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
    }
  }
}

// Q4_K super-block (144 bytes, 256 elements): f16 d, f16 dmin, 12 bytes
// holding eight 6-bit (scale, min) pairs, 128 bytes of nibbles. Sub-block s
// (32 elements) decodes as d * scale[s] * nibble - dmin * min[s]. Each group
// of 64 elements uses 32 bytes: low nibbles for sub-block 2g, high for 2g+1.
void decode_q4_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 144, dst += 256) {
    const float d = half_to_float(src);
    const float dmin = half_to_float(src + 2);
    const uint8_t* sm = src + 4;
    const uint8_t* qs = src + 16;
    uint8_t scale[8];
    uint8_t min[8];
    for (int s = 0; s < 4; ++s) {
      // Sub-blocks 0-3: low 6 bits of bytes 0-3 (scales) and 4-7 (mins).
      scale[s] = sm[s] & 63;
      min[s] = sm[s + 4] & 63;
      // Sub-blocks 4-7: low 4 bits from bytes 8-11, high 2 bits from the top
      // bits of bytes 0-3 (scales) and 4-7 (mins).
      scale[s + 4] = static_cast<uint8_t>((sm[s + 8] & 0x0F) | ((sm[s] >> 6) << 4));
      min[s + 4] = static_cast<uint8_t>((sm[s + 8] >> 4) | ((sm[s + 4] >> 6) << 4));
    }
    for (int g = 0; g < 4; ++g) {
      const float d_lo = d * scale[2 * g], m_lo = dmin * min[2 * g];
      const float d_hi = d * scale[2 * g + 1], m_hi = dmin * min[2 * g + 1];
      const uint8_t* q = qs + 32 * g;
      float* y = dst + 64 * g;
      for (int l = 0; l < 32; ++l) {
        y[l] = d_lo * static_cast<float>(q[l] & 0x0F) - m_lo;
        y[l + 32] = d_hi * static_cast<float>(q[l] >> 4) - m_hi;
      }
    }
  }
}

// Q6_K super-block (210 bytes, 256 elements): 128 bytes of low nibbles (ql),
// 64 bytes of 2-bit high parts (qh), 16 int8 scales, f16 d. Each half of 128
// elements uses 64 ql bytes, 32 qh bytes and 8 scales; within a half, quarter
// k (32 elements) takes nibble (k / 2 ? high : low) of ql[(k % 2) * 32 + l]
// and bits 2k..2k+1 of qh[l]; x = d * scale * (q6 - 32), one scale per 16.
void decode_q6_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 210, dst += 256) {
    const float d = half_to_float(src + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = src + 64 * half;
      const uint8_t* qh = src + 128 + 32 * half;
      const int8_t* s = sc + 8 * half;
      float* y = dst + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(s[is]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(s[is + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(s[is + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(s[is + 6]) * static_cast<float>(q3);
      }
    }
  }
}

using Decoder = void (*)(const uint8_t*, float*, int64_t);

Decoder decoder_for(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return decode_f32;
    case GgmlType::F16: return decode_f16;
    case GgmlType::BF16: return decode_bf16;
    case GgmlType::Q8_0: return decode_q8_0;
    case GgmlType::Q4_0: return decode_q4_0;
    case GgmlType::Q4_1: return decode_q4_1;
    case GgmlType::Q4_K: return decode_q4_k;
    case GgmlType::Q6_K: return decode_q6_k;
    default: return nullptr;
  }
}

Decoder checked_decoder(GgmlType type, const std::string& what) {
  Decoder dec = decoder_for(type);
  if (dec == nullptr) {
    throw LoadError(what + ": ggml type " + ggml_type_name(type) +
                    " cannot be dequantized (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, "
                    "Q6_K)");
  }
  return dec;
}

}  // namespace

bool can_dequantize(GgmlType type) { return decoder_for(type) != nullptr; }

void dequantize_blocks(GgmlType type, const uint8_t* src, float* dst, int64_t n,
                       const std::string& what) {
  Decoder dec = checked_decoder(type, what);
  const GgmlTypeTraits& t = ggml_traits(type);
  TORCH_CHECK(n % t.block_size == 0, "dequantize_blocks: ", n, " is not a multiple of ",
              t.block_size);
  dec(src, dst, n / t.block_size);
}

at::Tensor dequantize_rows(GgmlType type, const uint8_t* src, int64_t rows, int64_t row_length,
                           const std::string& what) {
  Decoder dec = checked_decoder(type, what);
  const GgmlTypeTraits& t = ggml_traits(type);
  TORCH_CHECK(rows >= 0 && row_length >= 0 && row_length % t.block_size == 0,
              "dequantize_rows: bad geometry ", rows, " x ", row_length);
  at::Tensor out = at::empty({rows, row_length}, at::TensorOptions().dtype(at::kFloat));  // [rows, row_length]
  const int64_t nblocks = rows * (row_length / t.block_size);
  float* dst = out.data_ptr<float>();
  const int64_t block_size = t.block_size;
  const int64_t block_bytes = t.block_bytes;
  // About 256K elements (1 MB of output) per task: small tensors stay on one
  // thread, where waking the pool would cost more than it saves.
  const int64_t grain = std::max<int64_t>(1, 262144 / block_size);
  at::parallel_for(0, nblocks, grain, [&](int64_t begin, int64_t end) {
    dec(src + begin * block_bytes, dst + begin * block_size, end - begin);
  });
  return out;
}

}  // namespace nnsight
