// Tensor data as the codecs carry it: raw little-endian element bytes of a
// contiguous CPU tensor, with the shape checked against the limits before
// anything is allocated.
#pragma once

#include "dsl/limits.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nnsight::dsl {

// Empty when the shape is acceptable (rank, no negative dim, element count
// within limits, no overflow), and then sets *numel; otherwise why not.
std::string check_tensor_shape(const std::vector<int64_t>& shape, const Limits& limits, uint64_t* numel);

// A new CPU tensor holding a copy of `nbytes` bytes (numel * element size of
// dtype, checked by the caller). Throws nnsight::Error when a bool tensor
// holds a byte other than 0 or 1.
at::Tensor tensor_from_bytes(at::ScalarType dtype, const std::vector<int64_t>& shape, const uint8_t* data,
                             size_t nbytes);

// The tensor's data as a contiguous CPU tensor (itself when it already is).
at::Tensor contiguous_cpu(const at::Tensor& t);

}  // namespace nnsight::dsl
