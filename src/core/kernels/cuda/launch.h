// Launchers of the hand-written CUDA kernels, in plain C++ types: the .cu
// files that define them are compiled by nvcc without LibTorch's headers
// (faster, and no ATen template code through nvcc), and
// core/kernels/cuda_kernels.cpp wraps them for at::Tensor.
//
// Every pointer is a device pointer; every launcher enqueues on `stream` (a
// cudaStream_t) and returns nullptr, or the CUDA error of its launch.
#pragma once

#include <cstdint>

namespace nnsight::kernels::cuda {

enum class DType { kFloat, kHalf, kBFloat16 };

// sum = a + b (rounded to the dtype, as at::add), out = rms_norm(sum): the
// float32 mean of squares, x * rsqrt(mean + eps) rounded to the dtype, times
// the weight (Hugging Face's order). b == nullptr: out = rms_norm(a) and sum
// is not written. a, b, sum, out: [rows, n] contiguous; weight: [n].
const char* launch_add_rms_norm(DType dtype, const void* a, const void* b, const void* weight, void* sum, void* out,
                                int64_t rows, int64_t n, float eps, void* stream);

// out = silu(gate) * up, each rounded to the dtype as the two ATen calls
// are. gate, up: rows of n elements `gate_stride` / `up_stride` elements
// apart (the halves of a fused gate_up output); out: [rows, n] contiguous.
const char* launch_silu_mul(DType dtype, const void* gate, const void* up, void* out, int64_t rows, int64_t n,
                            int64_t gate_stride, int64_t up_stride, void* stream);

// Rotary ("rotate half") on q and k in place, in one launch: q [tokens,
// q_heads, q_dim], k [tokens, k_heads, k_dim], contiguous; the first
// rot_dim features of each head turn. cos/sin: [max_position, rot_dim / 2]
// in the dtype. Rounded as the device path's ATen calls round
// (x1 * c and x2 * s each to the dtype, then their difference / sum).
const char* launch_rotary_qk(DType dtype, void* q, void* k, const int64_t* positions, const void* cos, const void* sin,
                             int64_t tokens, int64_t q_heads, int64_t k_heads, int64_t q_dim, int64_t k_dim,
                             int64_t rot_dim, void* stream);

// Attention for a step where every sequence has one query row (decode):
// query row s belongs to sequence s and attends to its context_lens[s] keys
// (or the last `window` of them), read through its block table. One block
// of threads per (head, sequence); keys are split over the block's warps in a
// fixed order, so a row's result does not depend on its batch companions.
// Reads only device memory (no host value of the step), so a CUDA graph can
// replay it for any context lengths. With query_start set it takes a step
// that also holds prefills: each sequence with exactly one query row is
// attended at that row of the flat batch with the same arithmetic (so a
// decoding row is the same in either kind of step); the others are skipped.
//   q, out: [seqs, heads, head_dim] contiguous; k_cache, v_cache:
//   [blocks, block_size, kv_heads, head_dim]; block_tables int32 [seqs,
//   max_blocks]; context_lens int32 [seqs]. head_dim <= 256.
struct DecodeAttentionArgs {
  DType dtype = DType::kFloat;
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* context_lens = nullptr;
  void* out = nullptr;
  int64_t seqs = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t block_size = 0, max_blocks = 0;
  float scale = 1.0f;
  int64_t window = 0;    // 0 = every key
  float softcap = 0.0f;  // 0 = off
  // nullptr (a decode step): sequence s is query row s. Else int32
  // [seqs + 1] (BatchMeta::query_start): sequence s owns rows
  // [query_start[s], query_start[s+1]) of q and out ([tokens, heads,
  // head_dim]) and is attended only if that is one row.
  const int32_t* query_start = nullptr;
};
constexpr int64_t kDecodeAttentionMaxHeadDim = 256;
const char* launch_paged_decode_attention(const DecodeAttentionArgs& args, void* stream);

}  // namespace nnsight::kernels::cuda
