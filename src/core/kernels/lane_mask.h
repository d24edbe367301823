// The mask of the first min(n, 16) lanes of a 16-lane (AVX-512 float32)
// vector: the loops over rows of any length take their tails as masked
// vectors with it (n <= 0 gives no lane).
#pragma once

#include <cstdint>

namespace nnsight::kernels {

inline uint16_t lanes_below16(int64_t n) {
  return n >= 16 ? uint16_t(0xFFFF) : n <= 0 ? uint16_t(0) : static_cast<uint16_t>((1u << n) - 1u);
}

}  // namespace nnsight::kernels
