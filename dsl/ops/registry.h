// The op registry: the only tensor operations a graph can run. Each op has a
// checked signature (parameter kinds, optional trailing parameters with
// defaults, a result kind for static checks) and an implementation.
//
// Adding an op is one registration in the family file it belongs to
// (dsl/ops/<family>.cpp), e.g.
//
//   r.add("softmax", "activation", "at::softmax(self, dim)")
//       .tensor("self").integer("dim")
//       .returns(kinds::Tensor)
//       .impl([](const OpArgs& a) -> Value { return at::softmax(a.tensor(0), a.integer(1)); });
//
// plus its case in tests/dsl/ops_test.cpp and its line in docs/ir.md (tests
// check both exist).
#pragma once

#include "dsl/ops/op_args.h"
#include "dsl/value.h"
#include "dsl/value_kind.h"

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nnsight::dsl {

using OpFn = Value (*)(const OpArgs&);
// Static result kind given the static kinds of the arguments actually passed.
using ResultKindFn = KindMask (*)(const KindMask* args, size_t n);

struct OpParam {
  std::string name;
  KindMask kinds = kinds::Any;         // what the argument may be
  std::optional<Value> default_value;  // set: the parameter may be omitted
};

struct OpDef {
  std::string name;
  std::string family;  // "arith", "shape", ... (docs grouping)
  std::string doc;     // the LibTorch call it stands for
  std::vector<OpParam> params;
  bool variadic = false;  // the last parameter repeats (0 or more times)
  KindMask result = kinds::Any;
  ResultKindFn result_fn = nullptr;  // overrides `result` when set
  OpFn fn = nullptr;

  size_t min_args() const;
  size_t max_args() const;  // SIZE_MAX when variadic
  // The parameter argument i binds to (the last one for variadic tails).
  const OpParam& param(size_t i) const;
  KindMask result_kind(const KindMask* args, size_t n) const;
  std::string signature() const;  // "softmax(self: tensor, dim: int) -> tensor"
};

// Chained declaration of one op; see the example above.
class OpDefBuilder {
 public:
  explicit OpDefBuilder(OpDef& def) : def_(def) {}
  OpDefBuilder& param(std::string name, KindMask kinds);
  OpDefBuilder& param(std::string name, KindMask kinds, Value default_value);
  OpDefBuilder& tensor(std::string name) { return param(std::move(name), kinds::Tensor); }
  OpDefBuilder& tensor_or_number(std::string name) { return param(std::move(name), kinds::TensorOrNumber); }
  OpDefBuilder& integer(std::string name) { return param(std::move(name), kinds::Int); }
  OpDefBuilder& integer(std::string name, int64_t dflt) {
    return param(std::move(name), kinds::Int, Value::integer(dflt));
  }
  OpDefBuilder& boolean(std::string name, bool dflt) {
    return param(std::move(name), kinds::Bool, Value::boolean(dflt));
  }
  OpDefBuilder& variadic(std::string name, KindMask kinds);
  OpDefBuilder& returns(KindMask kinds);
  OpDefBuilder& returns(ResultKindFn fn);
  OpDefBuilder& impl(OpFn fn);

 private:
  OpDef& def_;
};

class OpRegistry {
 public:
  // Every built-in op (filled once, on first use; read-only afterwards, so it
  // may be shared by threads).
  static const OpRegistry& global();

  const OpDef* find(std::string_view name) const;
  // In registration order, grouped by family.
  const std::deque<OpDef>& ops() const { return ops_; }

  // Declares a new op; throws std::logic_error on a duplicate name.
  OpDefBuilder add(std::string name, std::string family, std::string doc);

 private:
  std::deque<OpDef> ops_;  // deque: pointers stay valid while adding
  std::unordered_map<std::string_view, const OpDef*> by_name_;
};

// The family registration functions, one per dsl/ops/<family>.cpp.
void register_arith_ops(OpRegistry& r);
void register_index_ops(OpRegistry& r);
void register_convert_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_activation_ops(OpRegistry& r);
void register_linalg_ops(OpRegistry& r);
void register_factory_ops(OpRegistry& r);
void register_container_ops(OpRegistry& r);

}  // namespace nnsight::dsl
