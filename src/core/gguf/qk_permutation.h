// llama.cpp's converter reorders the rows of every head of the q and k
// projections (weights and biases) from Hugging Face's rotate-half layout to
// the interleaved-pairs layout its rotary kernel expects:
//   gguf = hf.reshape(n_head, 2, head_dim / 2, ...).swapaxes(1, 2).reshape(hf.shape)
// i.e. within a head, gguf row 2j + t holds hf row t * head_dim / 2 + j.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace nnsight {

// Inverse of the converter's permutation over dim 0 of `gguf_rows`, which
// holds `num_heads` whole heads ([num_heads * head_dim, ...], head_dim even).
// Returns a new contiguous tensor in Hugging Face row order.
at::Tensor unpermute_qk_rows(const at::Tensor& gguf_rows, int64_t num_heads);

}  // namespace nnsight
