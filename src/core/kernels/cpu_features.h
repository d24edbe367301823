// The vector instruction sets this CPU can run, for the kernels' runtime
// dispatch (each kernel also has a portable path for any CPU).
#pragma once

namespace nnsight::kernels {

struct CpuFeatures {
  bool avx2 = false;         // x86-64 AVX2 + FMA
  bool avx512 = false;       // x86-64 AVX-512 F + BW + VL (and AVX2 + FMA)
  bool avx512_bf16 = false;  // and AVX512_BF16
};

// Detected once (always all false off x86-64). The environment variable
// NNSIGHT_CPU (avx512, avx2 or scalar) caps them, never adding one the CPU
// lacks: for running and measuring a narrower CPU's kernels on a wider one.
const CpuFeatures& cpu_features();

}  // namespace nnsight::kernels
