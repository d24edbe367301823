#include "support/bitwise_equal.h"

#include <cstring>

namespace nnsight::testing {

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), static_cast<size_t>(ac.nbytes())) == 0;
}

}  // namespace nnsight::testing
