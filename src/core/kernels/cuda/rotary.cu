// Rotary on q and k in one launch (launch.h): one thread per rotated pair.
#include "core/kernels/cuda/element.cuh"

namespace nnsight::kernels::cuda {
namespace {

template <typename T>
__global__ void rotary_qk_kernel(T* __restrict__ q, T* __restrict__ k, const int64_t* __restrict__ positions,
                                 const T* __restrict__ cos, const T* __restrict__ sin, int64_t tokens, int64_t q_heads,
                                 int64_t k_heads, int64_t q_dim, int64_t k_dim, int64_t half) {
  using E = Element<T>;
  const int64_t q_pairs = tokens * q_heads * half;
  const int64_t total = q_pairs + tokens * k_heads * half;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const bool is_q = idx < q_pairs;
    const int64_t j = is_q ? idx : idx - q_pairs;
    const int64_t heads = is_q ? q_heads : k_heads, dim = is_q ? q_dim : k_dim;
    const int64_t i = j % half, th = j / half, t = th / heads;
    T* x = (is_q ? q : k) + th * dim;
    const int64_t p = positions[t];
    const float c = E::load(cos + p * half + i), s = E::load(sin + p * half + i);
    const float x1 = E::load(x + i), x2 = E::load(x + half + i);
    // x1 * c - x2 * s, each product rounded to the dtype first (ATen's
    // order); the _rn intrinsics keep the compiler from fusing them into an
    // FMA, which would round float32 differently from ATen's two kernels.
    E::store(x + i, __fsub_rn(E::round(__fmul_rn(x1, c)), E::round(__fmul_rn(x2, s))));
    E::store(x + half + i, __fadd_rn(E::round(__fmul_rn(x2, c)), E::round(__fmul_rn(x1, s))));
  }
}

}  // namespace

const char* launch_rotary_qk(DType dtype, void* q, void* k, const int64_t* positions, const void* cos,
                             const void* sin, int64_t tokens, int64_t q_heads, int64_t k_heads, int64_t q_dim,
                             int64_t k_dim, int64_t rot_dim, void* stream) {
  const int64_t half = rot_dim / 2;
  const int64_t total = tokens * (q_heads + k_heads) * half;
  if (total == 0) return nullptr;
  constexpr int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65535);
  return dispatch(dtype, [&](auto tag) -> const char* {
    using T = decltype(tag);
    rotary_qk_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<T*>(q), static_cast<T*>(k), positions, static_cast<const T*>(cos), static_cast<const T*>(sin),
        tokens, q_heads, k_heads, q_dim, k_dim, half);
    return launch_error();
  });
}

}  // namespace nnsight::kernels::cuda
