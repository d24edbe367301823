#include "dsl/tensor_bytes.h"

#include "dsl/dtype.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>

#include <cstring>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "graph tensors are raw little-endian bytes; a big-endian host would need byte swaps");

namespace nnsight::dsl {

std::string check_tensor_shape(const std::vector<int64_t>& shape, const Limits& limits, uint64_t* numel) {
  if (shape.size() > limits.max_tensor_rank)
    return "tensor rank " + std::to_string(shape.size()) + " exceeds the limit of " +
           std::to_string(limits.max_tensor_rank);
  bool empty = false;
  uint64_t n = 1;  // product of the non-zero dims: bounded too, so strides cannot overflow
  for (int64_t d : shape) {
    if (d < 0) return "negative tensor dimension " + std::to_string(d);
    if (d == 0) {
      empty = true;
      continue;
    }
    // n * d > max, without overflowing.
    if (n > limits.max_tensor_elements / static_cast<uint64_t>(d))
      return "tensor shape has more than " + std::to_string(limits.max_tensor_elements) +
             " elements (the element limit)";
    n *= static_cast<uint64_t>(d);
  }
  if (empty) n = 0;
  *numel = n;
  return {};
}

at::Tensor tensor_from_bytes(at::ScalarType dtype, const std::vector<int64_t>& shape, const uint8_t* data,
                             size_t nbytes) {
  if (dtype == at::kBool) {
    for (size_t i = 0; i < nbytes; ++i)
      if (data[i] > 1)
        throw Error("bool tensor element " + std::to_string(i) + " is " + std::to_string(data[i]) + ", not 0 or 1");
  }
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  TORCH_CHECK(static_cast<size_t>(t.numel()) * t.element_size() == nbytes, "tensor byte count mismatch");
  if (nbytes) std::memcpy(t.data_ptr(), data, nbytes);
  return t;
}

at::Tensor contiguous_cpu(const at::Tensor& t) {
  at::Tensor c = t.device().is_cpu() ? t : t.cpu();
  return c.is_contiguous() ? c : c.contiguous();
}

}  // namespace nnsight::dsl
