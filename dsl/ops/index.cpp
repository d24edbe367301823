// Indexing with Python's meaning: getitem reads x[idx] (a view where LibTorch
// gives one), setitem writes x[idx] = value IN PLACE (index_put_ into the
// indexed part of x). In-place matters: a tensor a Get returned is a view of
// the model's activation, so setitem on it changes what the model computes.
#include "dsl/ops/index_spec.h"
#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

namespace nnsight::dsl {
namespace {

// Python's normalisation of an element index into a sequence of n.
size_t element_index(const OpArgs& a, int64_t i, size_t n) {
  int64_t k = i < 0 ? i + static_cast<int64_t>(n) : i;
  if (k < 0 || k >= static_cast<int64_t>(n))
    a.fail(1, "index " + std::to_string(i) + " out of range for " + std::to_string(n) + " elements");
  return static_cast<size_t>(k);
}

Value getitem(const OpArgs& a) {
  const Value& self = a[0];
  const Value& idx = a[1];
  if (self.is(ValueKind::Tuple)) {
    if (!idx.is(ValueKind::Int)) a.fail(1, "a tuple is indexed by an int, got " + idx.describe());
    const auto& items = self.as_tuple();
    return Value(items[element_index(a, idx.as_int(), items.size())]);
  }
  if (self.is(ValueKind::List)) {
    if (!idx.is(ValueKind::Int)) a.fail(1, "a list is indexed by an int, got " + idx.describe());
    const auto& items = self.as_list();
    return items[element_index(a, idx.as_int(), items.size())];
  }
  if (!self.is_tensor()) a.fail(0, "expected a tensor, tuple or list, got " + self.describe());
  std::vector<at::indexing::TensorIndex> ti = to_tensor_indices(idx);
  return self.as_tensor().index(ti);
}

Value setitem(const OpArgs& a) {
  const Value& self = a[0];
  if (!self.is_tensor()) {
    a.fail(0, "only tensors support indexed assignment, got " + self.describe() +
                  " (assign into one of its tensors, e.g. out[0][...] = v, or set the whole value)");
  }
  at::Tensor t = self.as_tensor();  // shares storage with the node's value
  std::vector<at::indexing::TensorIndex> ti = to_tensor_indices(a[1]);
  const Value& v = a[2];
  if (v.is_tensor()) {
    t.index_put_(ti, v.as_tensor());
  } else if (v.is_number()) {
    t.index_put_(ti, a.scalar(2));
  } else {
    a.fail(2, "expected a tensor or a number, got " + v.describe());
  }
  return Value(t);
}

}  // namespace

void register_index_ops(OpRegistry& r) {
  constexpr KindMask kIndexLike = kinds::Index | kinds::Int | kinds::None | kinds::Tensor | kinds::List;
  r.add("getitem", "index", "self.index(indices) for a tensor; element i of a tuple or list (tuple element access)")
      .param("self", kinds::Tensor | kinds::Tuple | kinds::List)
      .param("index", kIndexLike)
      .returns(kinds::Any)
      .impl(getitem);
  r.add("setitem", "index", "self.index_put_(indices, value): in place; returns self")
      .tensor("self")
      .param("index", kIndexLike)
      .tensor_or_number("value")
      .returns(kinds::Tensor)
      .impl(setitem);
}

}  // namespace nnsight::dsl
