// Portable tiles of the CPU linear kernel (see linear_tiles.h for the
// contract), for CPUs without AVX2 and for other architectures.
//
// Every output element goes through the one out-of-line function dot(), so
// they all run the same machine code: eight partial sums, partial p taking
// k = p, p + 8, p + 16, ... in increasing k, added by the tree (p, p + 4),
// (p, p + 2), (p, p + 1). Keeping it out of line also keeps the compiler from
// contracting or reordering it differently at different call sites.
#include "core/kernels/linear_tiles.h"

namespace nnsight::kernels::detail {

namespace {

inline float widen(float v) { return v; }
inline float widen(uint16_t bf16_bits) { return float_from_bf16_bits(bf16_bits); }

template <typename T>
__attribute__((noinline)) float dot(const T* x, const T* w, int64_t K) {
  float p[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int l = 0; l < 8; ++l) p[l] += widen(x[k + l]) * widen(w[k + l]);
  for (int l = 0; k + l < K; ++l) p[l] += widen(x[k + l]) * widen(w[k + l]);
  const float q0 = p[0] + p[4], q1 = p[1] + p[5], q2 = p[2] + p[6], q3 = p[3] + p[7];
  return (q0 + q2) + (q1 + q3);
}

template <typename T, int MR, int NR>
void tile(const TileArgs& a) {
  float sums[MR * NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      sums[i * NR + j] = dot(static_cast<const T*>(a.x[i]), static_cast<const T*>(a.w[j]), a.k);
  store_sums<T>(a, MR, NR, sums);
}

template <typename T>
TileSet make_set() {
  TileSet s;
  s.max_mr = 4;
  s.by_mr[1] = TileKernel{4, &tile<T, 1, 4>};
  s.by_mr[2] = TileKernel{4, &tile<T, 2, 4>};
  s.by_mr[3] = TileKernel{4, &tile<T, 3, 4>};
  s.by_mr[4] = TileKernel{4, &tile<T, 4, 4>};
  return s;
}

}  // namespace

const TileSet* scalar_tiles_f32() {
  static const TileSet set = make_set<float>();
  return &set;
}

const TileSet* scalar_tiles_bf16() {
  static const TileSet set = make_set<uint16_t>();
  return &set;
}

}  // namespace nnsight::kernels::detail
