// The input gradient of a linear layer, dx = g w (for y = x w^T), for the
// backward of the recorded kernels (kernel_gradients.h), on the engine's own
// thread pool.
//
// Why not at::matmul / addmm: LibTorch hands these to OpenBLAS, whose own
// threads spin in sched_yield beside the engine's pool; on the 2-core machines
// a gradient trace's backward at 10 tokens spent about half its samples
// yielding (docs/design.md, "Gradient backward"). A gradient's rows are few
// (the tokens of one step), so the product is, per row of g, a weighted sum
// of w's rows (kernels::axpy_rows): the rows of w are cut into fixed chunks
// run in parallel, each decoding whole rows (as the forward's kernel streams
// them) and summing into a partial dx of its own; the partials are added in
// chunk order, so each dx element's sum has one order whatever the thread
// count. Only the rows of w that g reaches are read at all (a logit
// difference reaches 2 of the LM head's 49,152).
#pragma once

#include <ATen/core/Tensor.h>

#include "core/kernels/packed_matrix.h"

namespace nnsight::kernels {

// Rows of g (tokens) up to which the pool's kernel runs; more go to BLAS,
// which then has enough rows to amortize its threads.
constexpr int64_t kInputGradMaxRows = 32;

// g: [..., N], w: [N, K] -> [..., K] in g's dtype. The pool's kernel for a
// contiguous CPU float32 or bfloat16 w and at most kInputGradMaxRows rows of
// g; at::matmul otherwise.
at::Tensor linear_input_grad(const at::Tensor& g, const at::Tensor& w);

// The same for a packed w [N, K], its reached rows decoded to the floats the
// forward's kernel used, a few at a time into a buffer that stays in L2.
// More rows than kInputGradMaxRows: w is decoded a block of rows at a time
// into one reused buffer and multiplied in by BLAS.
at::Tensor packed_linear_input_grad(const at::Tensor& g, const PackedMatrix& w);

}  // namespace nnsight::kernels
