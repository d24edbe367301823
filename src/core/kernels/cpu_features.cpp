#include "core/kernels/cpu_features.h"

namespace nnsight::kernels {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    c.avx512 = c.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    c.avx512_bf16 = c.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
    return c;
  }();
  return f;
}

}  // namespace nnsight::kernels
