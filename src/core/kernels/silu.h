// SiLU, x * sigmoid(x), and the gated form silu(gate) * up of Llama-style
// MLPs, for the engine's CPU float32 activations: the same bits as
// at::silu (and at::silu(gate) * up) where LibTorch vectorizes a whole row,
// without its per-call operator overhead, and the gated form in one pass
// with one output (a decode step of the default model spent about 4 us per
// layer in at::silu and the multiply, most of it outside the arithmetic).
//
// Each element is computed as x / (1 + exp(-x)) with SLEEF's 16-lane expf
// (Sleef_expf16_u10, the function LibTorch's AVX-512 kernels call, found in
// the process at run time): a row's tail is a masked vector of the same
// function, so an element's value never depends on where its row sits in
// the batch. Elsewhere (no AVX-512, no SLEEF in the process, another dtype or
// device, a forward recording gradients) both fall back to LibTorch.
#pragma once

#include <ATen/ATen.h>

namespace nnsight::kernels {

at::Tensor silu(const at::Tensor& x);

// silu(gate) * up, rounded as the two operations are (silu(gate) to float first).
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

}  // namespace nnsight::kernels
