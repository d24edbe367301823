// New tensors shaped like an existing one: zeros_like, ones_like, full_like,
// seeded randn_like; and where(cond, a, b).
#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace nnsight::dsl {
namespace {

// Same numbers on every process and device for a given (seed, shape, dtype):
// drawn on a CPU generator seeded from the node's seed, then moved to the
// tensor's device. float64 tensors are drawn in float64, every other floating
// type in float32 and then converted.
Value randn_like(const OpArgs& a) {
  const at::Tensor& t = a.tensor(0);
  if (!at::isFloatingType(t.scalar_type())) a.fail(0, "randn_like needs a floating tensor, got " + Value(t).describe());
  uint64_t seed = static_cast<uint64_t>(a.integer(1));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::ScalarType draw = t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor r = at::randn(t.sizes(), gen, at::TensorOptions().dtype(draw));
  return r.to(t.options());
}

at::Tensor as_tensor_like(const OpArgs& a, size_t i, const at::Tensor& like) {
  const Value& v = a[i];
  if (v.is_tensor()) return v.as_tensor();
  if (!v.is_number()) a.fail(i, "expected a tensor or a number, got " + v.describe());
  at::Scalar s = a.scalar(i);
  return at::scalar_tensor(s, like.options().dtype(at::result_type(like, s)));
}

Value where(const OpArgs& a) {
  const at::Tensor& cond = a.tensor(0);
  const Value& x = a[1];
  const Value& y = a[2];
  if (x.is_tensor() || y.is_tensor()) {
    const at::Tensor& like = x.is_tensor() ? x.as_tensor() : y.as_tensor();
    return at::where(cond, as_tensor_like(a, 1, like), as_tensor_like(a, 2, like));
  }
  at::Scalar sx = a.scalar(1), sy = a.scalar(2);
  auto opts = cond.options().dtype(at::result_type(sx, sy));
  return at::where(cond, at::scalar_tensor(sx, opts), at::scalar_tensor(sy, opts));
}

}  // namespace

void register_factory_ops(OpRegistry& r) {
  r.add("zeros_like", "factory", "at::zeros_like(self)")
      .tensor("self")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::zeros_like(a.tensor(0)); });
  r.add("ones_like", "factory", "at::ones_like(self)")
      .tensor("self")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::ones_like(a.tensor(0)); });
  r.add("full_like", "factory", "at::full_like(self, fill_value)")
      .tensor("self")
      .param("fill_value", kinds::Number)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::full_like(a.tensor(0), a.scalar(1)); });
  r.add("randn_like", "factory", "at::randn(self.sizes(), CPU generator seeded with seed).to(self.options())")
      .tensor("self")
      .integer("seed")
      .returns(kinds::Tensor)
      .impl(randn_like);
  r.add("where", "factory", "at::where(condition, self, other); numbers allowed for self/other")
      .tensor("condition")
      .tensor_or_number("self")
      .tensor_or_number("other")
      .returns(kinds::Tensor)
      .impl(where);
}

}  // namespace nnsight::dsl
