// The residual add and the RMSNorm after it, one block per row (launch.h).
#include "core/kernels/cuda/element.cuh"

namespace nnsight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void add_rms_norm_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ weight,
                                    T* __restrict__ sum, T* __restrict__ out, int64_t n, float eps) {
  using E = Element<T>;
  const int64_t row = blockIdx.x;
  const T* ar = a + row * n;
  T* orow = out + row * n;
  // The rounded sum is what the norm reads (the sum is a tensor the next
  // layer adds to), so it is stored first and read back.
  const T* xr = ar;
  if (b != nullptr) {
    const T* br = b + row * n;
    T* sr = sum + row * n;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) E::store(sr + i, E::load(ar + i) + E::load(br + i));
    xr = sr;
  }
  float sq = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    // A thread re-reads only what it wrote itself: no barrier needed.
    const float v = E::load(xr + i);
    sq += v * v;
  }
  __shared__ float warp_sums[kThreads / 32];
  sq = warp_sum(sq);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = sq;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  const float r = rsqrtf(total / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    E::store(orow + i, E::load(weight + i) * E::round(E::load(xr + i) * r));
}

}  // namespace

const char* launch_add_rms_norm(DType dtype, const void* a, const void* b, const void* weight, void* sum, void* out,
                                int64_t rows, int64_t n, float eps, void* stream) {
  if (rows == 0) return nullptr;
  return dispatch(dtype, [&](auto tag) -> const char* {
    using T = decltype(tag);
    add_rms_norm_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(a), static_cast<const T*>(b), static_cast<const T*>(weight), static_cast<T*>(sum),
        static_cast<T*>(out), n, eps);
    return launch_error();
  });
}

}  // namespace nnsight::kernels::cuda
