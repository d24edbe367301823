// Element types of the CUDA kernels: loads to float, stores from float (round
// to nearest even, as ATen's casts), and a float rounded through the type (an
// ATen op on half or bfloat16 computes in float and rounds once).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/kernels/cuda/launch.h"

namespace nnsight::kernels::cuda {

template <typename T>
struct Element;

template <>
struct Element<float> {
  static __device__ __forceinline__ float load(const float* p) { return *p; }
  static __device__ __forceinline__ void store(float* p, float v) { *p = v; }
  static __device__ __forceinline__ float round(float v) { return v; }
};

template <>
struct Element<__half> {
  static __device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
  static __device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
  static __device__ __forceinline__ float round(float v) { return __half2float(__float2half_rn(v)); }
};

template <>
struct Element<__nv_bfloat16> {
  static __device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
  static __device__ __forceinline__ float round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
};

// Calls f(T{}) with T the element type of `dtype`.
template <typename F>
const char* dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat:
      return f(float{});
    case DType::kHalf:
      return f(__half{});
    case DType::kBFloat16:
      return f(__nv_bfloat16{});
  }
  return "unknown dtype";
}

// nullptr after a successful launch, else the error's text.
inline const char* launch_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

// Sum over a warp, every lane receiving it (a fixed butterfly: the same
// order for every row).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace nnsight::kernels::cuda
