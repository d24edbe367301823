// Tensors from literal values, for test files compiled without the ATen
// factory functions (tests/front/tensor_operators_test.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace nnsight::testing {

// A float32 CPU tensor [values.size()].
at::Tensor float_tensor(const std::vector<float>& values);

}  // namespace nnsight::testing
