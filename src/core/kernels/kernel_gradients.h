// Autograd for the hand-written kernels, used only in a gradient forward
// (core/gradient_forward.h): when an input requires grad, each kernel entry
// point (linear, packed_linear, rms_norm, RotaryEmbedding::apply_, attend)
// hands over to the recorded version here.
//
// Every recorded version runs the very same kernel forward, so a gradient
// trace sees bitwise the activations of the same trace without gradients;
// only the backward is new, written with ATen ops (no library has a backward
// for these kernels: they are ours). Gradients flow to activations only:
// weights never require grad, and keys and values already in the KV cache
// from earlier steps are constants of this step's graph.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

#include "batching/batch_meta.h"
#include "core/kernels/packed_matrix.h"
#include "core/kernels/paged_attention.h"
#include "core/kernels/rotary.h"
#include "core/kv_cache.h"

namespace nnsight::kernels {

// Whether a kernel call on x must record itself for autograd.
inline bool records_grad(const at::Tensor& x) { return x.requires_grad() && at::GradMode::is_enabled(); }

// linear(x, w, bias) with dx = dy w (linear_input_grad.h).
at::Tensor linear_recorded(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);
// packed_linear(x, w, bias) with dx = dy w, w decoded for the backward (linear_input_grad.h).
at::Tensor packed_linear_recorded(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias);
// rms_norm(x, weight, eps); the backward recomputes the norm with ATen ops.
at::Tensor rms_norm_recorded(const at::Tensor& x, const at::Tensor& weight, double eps);
// A rotated copy of x (apply_ on a clone); the backward rotates back.
at::Tensor rotary_recorded(const RotaryEmbedding& rotary, const at::Tensor& x, const at::Tensor& positions);
// write_kv, then paged_attention; the backward recomputes each sequence's
// attention densely with ATen ops (earlier steps' keys and values as constants).
at::Tensor attend_recorded(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, KVCache& cache,
                           const batching::BatchMeta& meta, double scale, const AttentionOptions& options);

}  // namespace nnsight::kernels
