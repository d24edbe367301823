#include "support/tensor_values.h"

#include <ATen/ATen.h>

namespace nnsight::testing {

at::Tensor float_tensor(const std::vector<float>& values) { return at::tensor(values, at::kFloat); }

}  // namespace nnsight::testing
