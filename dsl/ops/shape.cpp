// Shape ops: reshape/view/transpose/permute/unsqueeze/squeeze/flatten, size,
// and joining (cat, stack) of a list of tensors.
#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>

namespace nnsight::dsl {
namespace {

// A list (or tuple) of tensors, as cat/stack take them.
std::vector<at::Tensor> tensor_list(const OpArgs& a, size_t i) {
  const Value& v = a[i];
  if (v.is(ValueKind::Tuple)) return v.as_tuple();
  if (!v.is(ValueKind::List)) a.fail(i, "expected a list of tensors, got " + v.describe());
  std::vector<at::Tensor> out;
  out.reserve(v.as_list().size());
  for (const Value& x : v.as_list()) {
    if (!x.is_tensor()) a.fail(i, "expected a list of tensors, found " + x.describe());
    out.push_back(x.as_tensor());
  }
  if (out.empty()) a.fail(i, "needs at least one tensor");
  return out;
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  const KindMask kDims = kinds::Int | kinds::List;
  r.add("reshape", "shape", "self.reshape(shape)")
      .tensor("self")
      .param("shape", kDims)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).reshape(a.int_list(1)); });
  r.add("view", "shape", "self.view(shape)")
      .tensor("self")
      .param("shape", kDims)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).view(a.int_list(1)); });
  r.add("transpose", "shape", "self.transpose(dim0, dim1)")
      .tensor("self")
      .integer("dim0")
      .integer("dim1")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).transpose(a.integer(1), a.integer(2)); });
  r.add("permute", "shape", "self.permute(dims)")
      .tensor("self")
      .param("dims", kDims)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).permute(a.int_list(1)); });
  r.add("unsqueeze", "shape", "self.unsqueeze(dim)")
      .tensor("self")
      .integer("dim")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).unsqueeze(a.integer(1)); });
  r.add("squeeze", "shape", "self.squeeze() (dim none) or self.squeeze(dim)")
      .tensor("self")
      .param("dim", kinds::Int | kinds::None, Value())
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value {
        auto dim = a.opt_integer(1);
        return dim ? a.tensor(0).squeeze(*dim) : a.tensor(0).squeeze();
      });
  r.add("flatten", "shape", "self.flatten(start_dim, end_dim)")
      .tensor("self")
      .integer("start_dim", 0)
      .integer("end_dim", -1)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return a.tensor(0).flatten(a.integer(1), a.integer(2)); });
  r.add("size", "shape", "self.size(dim) as an int")
      .tensor("self")
      .integer("dim")
      .returns(kinds::Int)
      .impl([](const OpArgs& a) -> Value { return Value::integer(a.tensor(0).size(a.integer(1))); });
  r.add("cat", "shape", "at::cat(tensors, dim)")
      .param("tensors", kinds::List | kinds::Tuple)
      .integer("dim", 0)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::cat(tensor_list(a, 0), a.integer(1)); });
  r.add("stack", "shape", "at::stack(tensors, dim)")
      .param("tensors", kinds::List | kinds::Tuple)
      .integer("dim", 0)
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::stack(tensor_list(a, 0), a.integer(1)); });
}

}  // namespace nnsight::dsl
