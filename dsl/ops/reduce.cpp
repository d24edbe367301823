// Reductions over dims: sum, mean, max, min, argmax, topk, norm. A dim of none
// reduces over all elements, as in PyTorch.
#include "dsl/ops/registry.h"

#include <ATen/ATen.h>

namespace nnsight::dsl {
namespace {

// max/min: a tensor for a full reduction, a (values, indices) tuple over a dim.
KindMask minmax_result(const KindMask* args, size_t n) {
  if (n < 2) return kinds::Tensor;
  KindMask r = 0;
  if (args[1] & kinds::None) r |= kinds::Tensor;
  if (args[1] & kinds::Int) r |= kinds::Tuple;
  return r;
}

template <bool kMax>
Value minmax(const OpArgs& a) {
  const at::Tensor& t = a.tensor(0);
  auto dim = a.opt_integer(1);
  if (!dim) return kMax ? t.max() : t.min();
  auto vi = kMax ? t.max(*dim, a.boolean(2)) : t.min(*dim, a.boolean(2));
  return Value::tuple({std::get<0>(vi), std::get<1>(vi)});
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  const KindMask kOptDims = kinds::None | kinds::Int | kinds::List;
  r.add("sum", "reduce", "self.sum() (dim none) or self.sum(dim, keepdim)")
      .tensor("self")
      .param("dim", kOptDims, Value())
      .boolean("keepdim", false)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value {
        auto dims = a.opt_int_list(1);
        return dims ? a.tensor(0).sum(*dims, a.boolean(2)) : a.tensor(0).sum();
      });
  r.add("mean", "reduce", "self.mean() (dim none) or self.mean(dim, keepdim)")
      .tensor("self")
      .param("dim", kOptDims, Value())
      .boolean("keepdim", false)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value {
        auto dims = a.opt_int_list(1);
        return dims ? a.tensor(0).mean(*dims, a.boolean(2)) : a.tensor(0).mean();
      });
  r.add("max", "reduce", "self.max() (dim none), or self.max(dim, keepdim) -> (values, indices)")
      .tensor("self")
      .param("dim", kinds::None | kinds::Int, Value())
      .boolean("keepdim", false)
      .returns(minmax_result)
      .impl(minmax<true>);
  r.add("min", "reduce", "self.min() (dim none), or self.min(dim, keepdim) -> (values, indices)")
      .tensor("self")
      .param("dim", kinds::None | kinds::Int, Value())
      .boolean("keepdim", false)
      .returns(minmax_result)
      .impl(minmax<false>);
  r.add("argmax", "reduce", "self.argmax(dim, keepdim); dim none: index into the flattened tensor")
      .tensor("self")
      .param("dim", kinds::None | kinds::Int, Value())
      .boolean("keepdim", false)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value {
        auto dim = a.opt_integer(1);
        c10::optional<int64_t> d;
        if (dim) d = *dim;
        return at::argmax(a.tensor(0), d, a.boolean(2));
      });
  r.add("topk", "reduce", "self.topk(k, dim, largest, sorted) -> (values, indices)")
      .tensor("self")
      .integer("k")
      .integer("dim", -1)
      .boolean("largest", true)
      .boolean("sorted", true)
      .returns(kinds::Tuple)
      .impl([](const OpArgs& a) -> Value {
        auto vi = a.tensor(0).topk(a.integer(1), a.integer(2), a.boolean(3), a.boolean(4));
        return Value::tuple({std::get<0>(vi), std::get<1>(vi)});
      });
  r.add("norm", "reduce", "at::norm(self, p) (dim none) or at::norm(self, p, dim, keepdim)")
      .tensor("self")
      .param("p", kinds::Number, Value::real(2.0))
      .param("dim", kOptDims, Value())
      .boolean("keepdim", false)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value {
        at::Scalar p = a.scalar(1);
        auto dims = a.opt_int_list(2);
        if (!dims) return at::norm(a.tensor(0), p);
        return at::norm(a.tensor(0), c10::optional<at::Scalar>(p), *dims, a.boolean(3));
      });
}

}  // namespace nnsight::dsl
