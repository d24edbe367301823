// Decode attention over the paged KV cache (launch.h): one block of kWarps
// warps per (head, sequence). Each warp walks every kWarps-th key of the
// sequence with an online softmax, its 32 lanes splitting head_dim; the warps'
// partial results are merged at the end. The order of every sum depends only
// on the sequence's own context length, so a row's result is the same in any
// batch.
#include <math.h>

#include "core/kernels/cuda/element.cuh"

namespace nnsight::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = static_cast<int>(kDecodeAttentionMaxHeadDim / 32);

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) paged_decode_attention_kernel(DecodeAttentionArgs a) {
  using E = Element<T>;
  const int64_t h = blockIdx.x, s = blockIdx.y;
  int64_t row = s;  // the sequence's query row
  if (a.query_start != nullptr) {
    row = a.query_start[s];
    if (a.query_start[s + 1] - row != 1) return;  // a prefill: not this kernel's (the whole block alike)
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t d_len = a.head_dim;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t ctx = a.context_lens[s];
  const int64_t first = a.window > 0 && ctx > a.window ? ctx - a.window : 0;
  const int32_t* table = a.block_tables + s * a.max_blocks;
  const T* q = static_cast<const T*>(a.q) + (row * a.heads + h) * d_len;
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);

  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    qv[i] = d < d_len ? E::load(q + d) : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int64_t j = first + warp; j < ctx; j += kWarps) {
    const int64_t slot = static_cast<int64_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
    const int64_t base = (slot * a.kv_heads + kvh) * d_len;
    float part = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < d_len) part += qv[i] * E::load(k_cache + base + d);
    }
    float score = warp_sum(part) * a.scale;
    if (a.softcap > 0.f) score = a.softcap * tanhf(score / a.softcap);
    // A key scoring -inf has weight 0 in ATen's softmax; skipped here
    // (the whole warp alike), not folded in as expf(-inf - -inf) = NaN.
    if (score == -INFINITY) continue;
    const float m_new = fmaxf(m, score);
    const float corr = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(score - m_new);
    l = l * corr + p;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < d_len) acc[i] = acc[i] * corr + p * E::load(v_cache + base + d);
    }
    m = m_new;
  }

  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][kDecodeAttentionMaxHeadDim];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    if (d < d_len) s_acc[warp][d] = acc[i];
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
  __syncthreads();
  // Warps with keys take part (chosen by their keys, not by their sums: a
  // NaN or infinite score makes the row NaN, as the ATen softmax does,
  // instead of dropping that warp's keys).
  float big = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w)
    if (first + w < ctx) big = fmaxf(big, s_m[w]);
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w)
    if (first + w < ctx) total += s_l[w] * expf(s_m[w] - big);
  T* out = static_cast<T*>(a.out) + (row * a.heads + h) * d_len;
  for (int64_t d = threadIdx.x; d < d_len; d += kWarps * 32) {
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      if (first + w < ctx) o += s_acc[w][d] * expf(s_m[w] - big);
    E::store(out + d, o / total);
  }
}

}  // namespace

const char* launch_paged_decode_attention(const DecodeAttentionArgs& args, void* stream) {
  if (args.seqs == 0 || args.heads == 0) return nullptr;
  if (args.head_dim > kDecodeAttentionMaxHeadDim) return "head_dim over the decode attention kernel's 256";
  if (args.seqs > 65535) return "more than 65535 sequences in one decode attention launch";
  const dim3 grid(static_cast<unsigned>(args.heads), static_cast<unsigned>(args.seqs));
  return dispatch(args.dtype, [&](auto tag) -> const char* {
    using T = decltype(tag);
    paged_decode_attention_kernel<T><<<grid, kWarps * 32, 0, static_cast<cudaStream_t>(stream)>>>(args);
    return launch_error();
  });
}

}  // namespace nnsight::kernels::cuda
