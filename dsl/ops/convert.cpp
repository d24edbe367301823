// Copies and conversions: clone, detach, to(dtype), contiguous, item.
#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>

namespace nnsight::dsl {
namespace {

Value item(const OpArgs& a) {
  const at::Tensor& t = a.tensor(0);
  if (t.numel() != 1) a.fail(0, "item() needs a tensor with one element, got " + Value(t).describe());
  at::Scalar s = t.item();
  if (t.scalar_type() == at::kBool) return Value::boolean(s.toBool());
  if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) return Value::integer(s.toLong());
  if (at::isFloatingType(t.scalar_type())) return Value::real(s.toDouble());
  a.fail(0, "item() of a " + Value(t).describe() + " has no int, double or bool value");
}

}  // namespace

void register_convert_ops(OpRegistry& r) {
  r.add("clone", "convert", "self.clone()").tensor("self").returns(kinds::Tensor).impl([](const OpArgs& a) -> Value {
    return a.tensor(0).clone();
  });
  r.add("detach", "convert", "self.detach()").tensor("self").returns(kinds::Tensor).impl([](const OpArgs& a) -> Value {
    return a.tensor(0).detach();
  });
  r.add("to", "convert", "self.to(dtype)")
      .tensor("self")
      .param("dtype", kinds::Dtype)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).to(a.dtype(1)); });
  r.add("contiguous", "convert", "self.contiguous()")
      .tensor("self")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).contiguous(); });
  r.add("item", "convert", "self.item(): int, double or bool by the tensor's dtype")
      .tensor("self")
      .returns(kinds::Number)
      .impl(item);
}

}  // namespace nnsight::dsl
