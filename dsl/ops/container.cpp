// Building lists and tuples out of node values (cat/stack take a list; a
// module's tuple output can be rebuilt and set).
#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

namespace nnsight::dsl {
namespace {

Value make_list(const OpArgs& a) {
  std::vector<Value> items;
  items.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) items.push_back(a[i]);
  return Value::list(std::move(items));
}

Value make_tuple(const OpArgs& a) {
  std::vector<at::Tensor> items;
  items.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Value& v = a[i];
    if (v.is_tensor()) {
      items.push_back(v.as_tensor());
    } else if (v.is_none()) {
      items.emplace_back();
    } else {
      a.fail(i, "a tuple holds tensors or none, got " + v.describe());
    }
  }
  return Value::tuple(std::move(items));
}

}  // namespace

void register_container_ops(OpRegistry& r) {
  r.add("list", "container", "[items...] (a list value)")
      .variadic("items", kinds::Any)
      .returns(kinds::List)
      .impl(make_list);
  r.add("tuple", "container", "(items...) (a tuple of tensors; none for a missing element)")
      .variadic("items", kinds::Tensor | kinds::None)
      .returns(kinds::Tuple)
      .impl(make_tuple);
}

}  // namespace nnsight::dsl
