// Whether two tensors are the same numbers bit for bit: same shape, dtype
// and bytes (strided tensors compared by their values in row-major order).
// Stricter than at::equal, which calls +0 and -0 equal and NaN unequal.
#pragma once

#include <ATen/core/Tensor.h>

namespace nnsight::testing {

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b);

}  // namespace nnsight::testing
