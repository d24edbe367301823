// Portable reference decoders (see packed_decode.h). Block layouts follow
// ggml (ggml-common.h / ggml-quants.c).
#include "core/kernels/packed_decode.h"

namespace nnsight::kernels::detail {

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

// Q5_0 block (22 bytes): f16 d, 32 bits qh, 16 bytes of nibbles as in Q4_0;
// bit j of qh is the fifth bit of element j; x = d * (q5 - 16).
void decode_q5_0(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 22, dst += 32) {
    const float d = half_to_float(src);
    uint32_t qh;
    std::memcpy(&qh, src + 2, 4);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int>((qs[j] & 0x0F) | (((qh >> j) & 1u) << 4)) - 16;
      const int hi = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
      dst[j] = d * static_cast<float>(lo);
      dst[j + 16] = d * static_cast<float>(hi);
    }
  }
}

// Q5_1 block (24 bytes): f16 d, f16 min m, 32 bits qh, 16 bytes of nibbles;
// x = d * q5 + m.
void decode_q5_1(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 24, dst += 32) {
    const float d = half_to_float(src);
    const float m = half_to_float(src + 2);
    uint32_t qh;
    std::memcpy(&qh, src + 4, 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = (qs[j] & 0x0Fu) | (((qh >> j) & 1u) << 4);
      const uint32_t hi = (qs[j] >> 4u) | (((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo) + m;
      dst[j + 16] = d * static_cast<float>(hi) + m;
    }
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

// Q4_K super-block (144 bytes, 256 elements): f16 d, f16 dmin, 12 bytes
// holding eight 6-bit (scale, min) pairs, 128 bytes of nibbles. Sub-block s
// (32 elements) decodes as (d * scale[s]) * nibble - dmin * min[s]. Each group
// of 64 elements uses 32 bytes: low nibbles for sub-block 2g, high for 2g+1.
void decode_q4_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 144, dst += 256) {
    const float d = half_to_float(src);
    const float dmin = half_to_float(src + 2);
    const uint8_t* sm = src + 4;
    const uint8_t* qs = src + 16;
    for (int g = 0; g < 4; ++g) {
      uint8_t sc_lo, mn_lo, sc_hi, mn_hi;
      k_scale_min(sm, 2 * g, &sc_lo, &mn_lo);
      k_scale_min(sm, 2 * g + 1, &sc_hi, &mn_hi);
      const float d_lo = d * static_cast<float>(sc_lo), m_lo = dmin * static_cast<float>(mn_lo);
      const float d_hi = d * static_cast<float>(sc_hi), m_hi = dmin * static_cast<float>(mn_hi);
      const uint8_t* q = qs + 32 * g;
      float* y = dst + 64 * g;
      for (int l = 0; l < 32; ++l) {
        y[l] = d_lo * static_cast<float>(q[l] & 0x0F) - m_lo;
        y[l + 32] = d_hi * static_cast<float>(q[l] >> 4) - m_hi;
      }
    }
  }
}

// Q5_K super-block (176 bytes, 256 elements): f16 d, f16 dmin, 12 scale/min
// bytes as in Q4_K, 32 bytes qh, 128 bytes of nibbles as in Q4_K. Element l of
// sub-block s takes bit s of qh[l] as its fifth bit; x = (d * scale) * q5 - dmin * min.
void decode_q5_k(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, src += 176, dst += 256) {
    const float d = half_to_float(src);
    const float dmin = half_to_float(src + 2);
    const uint8_t* sm = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    for (int g = 0; g < 4; ++g) {
      uint8_t sc_lo, mn_lo, sc_hi, mn_hi;
      k_scale_min(sm, 2 * g, &sc_lo, &mn_lo);
      k_scale_min(sm, 2 * g + 1, &sc_hi, &mn_hi);
      const float d_lo = d * static_cast<float>(sc_lo), m_lo = dmin * static_cast<float>(mn_lo);
      const float d_hi = d * static_cast<float>(sc_hi), m_hi = dmin * static_cast<float>(mn_hi);
      const uint8_t* q = qs + 32 * g;
      float* y = dst + 64 * g;
      for (int l = 0; l < 32; ++l) {
        const int lo = (q[l] & 0x0F) | (((qh[l] >> (2 * g)) & 1) << 4);
        const int hi = (q[l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4);
        y[l] = d_lo * static_cast<float>(lo) - m_lo;
        y[l + 32] = d_hi * static_cast<float>(hi) - m_hi;
      }
    }
  }
}

// Q6_K super-block (210 bytes, 256 elements): 128 bytes of low nibbles (ql),
// 64 bytes of 2-bit high parts (qh), 16 int8 scales, f16 d. Each half of 128
// elements uses 64 ql bytes, 32 qh bytes and 8 scales; within a half, quarter
// k (32 elements) takes nibble (k / 2 ? high : low) of ql[(k % 2) * 32 + l]
// and bits 2k..2k+1 of qh[l]; x = (d * scale) * (q6 - 32), one scale per 16.
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

}  // namespace nnsight::kernels::detail
