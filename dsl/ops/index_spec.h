// Conversion of an index value (an index spec, an int, none, a tensor, or a
// list mixing those) into LibTorch's TensorIndex list.
#pragma once

#include "dsl/value.h"

#include <ATen/TensorIndexing.h>

#include <vector>

namespace nnsight::dsl {

// Throws nnsight::Error for a value that is not an index.
std::vector<at::indexing::TensorIndex> to_tensor_indices(const Value& index);

}  // namespace nnsight::dsl
