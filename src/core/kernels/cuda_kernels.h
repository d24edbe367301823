// The hand-written CUDA kernels (src/core/kernels/cuda/*.cu) for at::Tensor:
// where the device path would launch several ATen kernels per layer, one
// launch. Built when the LibTorch has CUDA and nvcc is found (CMake option
// NNSIGHT_CUDA_KERNELS); elsewhere cuda_kernels_for() is false and every
// caller keeps its ATen path.
//
// Each function here requires cuda_kernels_for() of its inputs and the
// layout it names; its caller checks both and otherwise takes the ATen path.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

#include "batching/batch_meta.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"

namespace nnsight::kernels {

// A CUDA tensor of float32, float16 or bfloat16, in a build with the kernels,
// not switched off (NNSIGHT_CUDA_KERNELS=0 in the environment, or
// UseCudaKernels(false)), and not recording gradients.
bool cuda_kernels_for(const at::Tensor& t);
// Whether this build compiled the kernels.
bool cuda_kernels_built();

// Turns the kernels off (or on) for its lifetime, process-wide: the tests
// compare them with the ATen path they replace.
class UseCudaKernels {
 public:
  explicit UseCudaKernels(bool on);
  ~UseCudaKernels();
  UseCudaKernels(const UseCudaKernels&) = delete;
  UseCudaKernels& operator=(const UseCudaKernels&) = delete;

 private:
  int before_;
};

namespace cuda {

// {a + b, rms_norm(a + b)}; a, b: [rows, hidden] contiguous, weight [hidden].
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& weight,
                                               double eps);
// x: [rows, hidden] contiguous, weight [hidden].
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
// gate, up: [rows, n] with unit stride along n (rows may be strided).
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);
// q: [tokens, q_heads, >= rot_dim], k: [tokens, k_heads, >= rot_dim],
// contiguous, rotated in place; positions int64 [tokens]; cos, sin
// [max_position, rot_dim / 2] in q's dtype, on q's device.
void rotary_qk_(at::Tensor& q, at::Tensor& k, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin,
                int64_t rot_dim);
// Whether paged_decode_attention takes this step: one query row per
// sequence, head_dim <= 256, the cache in q's dtype.
bool decode_attention_applies(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta);
// q: [seqs, heads, head_dim] -> [seqs, heads, head_dim].
at::Tensor paged_decode_attention(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                  double scale, const AttentionOptions& options);

// Whether some sequences of the step have one query row (decodes) and
// some more (prefills), from the host copies. Built in every build.
bool mixes_decodes_and_prefills(const batching::BatchMeta& meta);
// Batch invariance across kinds of step: a decoding sequence's row comes
// from the decode kernel in a decode step, so in a step mixing it with
// prefills (which flash or the padded path attend, with other arithmetic) its
// row of `out` is rewritten by the same kernel, reading the step's
// query_start on the device (no upload). Applies where the kernel would take
// the row (q and the cache in one dtype, head_dim <= 256); returns whether
// it rewrote any row. q, out: [num_tokens, heads, head_dim] contiguous.
bool redo_one_row_sequences(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta, double scale,
                            const AttentionOptions& options, at::Tensor& out);

}  // namespace cuda
}  // namespace nnsight::kernels
