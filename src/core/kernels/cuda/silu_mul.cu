// silu(gate) * up in one pass (launch.h).
#include "core/kernels/cuda/element.cuh"

namespace nnsight::kernels::cuda {
namespace {

template <typename T>
__global__ void silu_mul_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out,
                                int64_t rows, int64_t n, int64_t gate_stride, int64_t up_stride) {
  using E = Element<T>;
  const int64_t total = rows * n;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / n, i = idx - r * n;
    const float g = E::load(gate + r * gate_stride + i);
    const float s = E::round(g / (1.0f + expf(-g)));  // at::silu's result, in the dtype
    E::store(out + idx, s * E::load(up + r * up_stride + i));
  }
}

}  // namespace

const char* launch_silu_mul(DType dtype, const void* gate, const void* up, void* out, int64_t rows, int64_t n,
                            int64_t gate_stride, int64_t up_stride, void* stream) {
  const int64_t total = rows * n;
  if (total == 0) return nullptr;
  constexpr int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65535);
  return dispatch(dtype, [&](auto tag) -> const char* {
    using T = decltype(tag);
    silu_mul_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), rows, n, gate_stride, up_stride);
    return launch_error();
  });
}

}  // namespace nnsight::kernels::cuda
