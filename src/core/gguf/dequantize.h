// Dequantization of ggml tensor encodings to float32: F32, F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K. Runs at every model load over every weight, so it
// splits the work over blocks with at::parallel_for.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "core/gguf/ggml_type.h"

namespace nnsight {

bool can_dequantize(GgmlType type);

// Decodes `n` elements (a multiple of the type's block size) starting at the
// block at `src` into `dst`, on the calling thread. Throws LoadError naming
// `what` and the type for an unsupported type.
void dequantize_blocks(GgmlType type, const uint8_t* src, float* dst, int64_t n, const std::string& what);

// Decodes `rows` consecutive rows of `row_length` elements each (row_length a
// multiple of the block size) starting at `src`, in parallel.
// Returns float32 [rows, row_length].
at::Tensor dequantize_rows(GgmlType type, const uint8_t* src, int64_t rows, int64_t row_length,
                           const std::string& what);

}  // namespace nnsight
