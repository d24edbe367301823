// Products: matmul, outer.
#include "dsl/ops/registry.h"

#include <ATen/ATen.h>

namespace nnsight::dsl {

void register_linalg_ops(OpRegistry& r) {
  r.add("matmul", "linalg", "at::matmul(self, other)")
      .tensor("self")
      .tensor("other")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::matmul(a.tensor(0), a.tensor(1)); });
  r.add("outer", "linalg", "at::outer(self, vec2)")
      .tensor("self")
      .tensor("vec2")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::outer(a.tensor(0), a.tensor(1)); });
}

}  // namespace nnsight::dsl
