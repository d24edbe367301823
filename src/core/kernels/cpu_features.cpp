#include "core/kernels/cpu_features.h"

#include <cstdlib>
#include <string>

#include <nnsight/error.hpp>

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
    if (const char* cap = std::getenv("NNSIGHT_CPU"); cap != nullptr) {
      const std::string v = cap;
      if (v != "avx512" && v != "avx2" && v != "scalar")
        throw ConfigError("NNSIGHT_CPU=" + v + ": expected avx512, avx2 or scalar");
      if (v == "avx2" || v == "scalar") c.avx512 = c.avx512_bf16 = false;
      if (v == "scalar") c.avx2 = false;
    }
    return c;
  }();
  return f;
}

}  // namespace nnsight::kernels
