// Greedy tokens: the index of each row's largest logit, as at::argmax(1)
// returns it (the first of equal maxima; the first NaN where a row has one),
// reading the row twice with 16-lane compares on AVX-512 CPUs. LibTorch's
// CPU argmax compares one element at a time: about 50 us of a 6 ms batch-1
// decode step of the default model (49152 logits).
#pragma once

#include <ATen/ATen.h>

namespace nnsight::runner {

// logits: [rows, vocab] float32 CPU contiguous; returns [rows] int64.
at::Tensor greedy_tokens(const at::Tensor& logits);

}  // namespace nnsight::runner
