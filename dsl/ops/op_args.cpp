#include "dsl/ops/op_args.h"

#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

namespace nnsight::dsl {

void OpArgs::fail(size_t i, const std::string& what) const {
  throw Error("argument " + std::to_string(i) + " ('" + def_.param(i).name + "') of '" + def_.name + "': " + what);
}

const Value& OpArgs::operator[](size_t i) const {
  if (i < n_) return *args_[i];
  const OpParam& p = def_.param(i);
  if (!p.default_value) fail(i, "missing and has no default");
  return *p.default_value;
}

const at::Tensor& OpArgs::tensor(size_t i) const {
  const Value& v = (*this)[i];
  if (!v.is_tensor()) fail(i, "expected a tensor, got " + v.describe());
  return v.as_tensor();
}

int64_t OpArgs::integer(size_t i) const {
  const Value& v = (*this)[i];
  if (!v.is(ValueKind::Int)) fail(i, "expected an int, got " + v.describe());
  return v.as_int();
}

std::optional<int64_t> OpArgs::opt_integer(size_t i) const {
  const Value& v = (*this)[i];
  if (v.is_none()) return std::nullopt;
  return integer(i);
}

double OpArgs::real(size_t i) const {
  const Value& v = (*this)[i];
  if (!v.is_number()) fail(i, "expected a number, got " + v.describe());
  return v.as_double();
}

bool OpArgs::boolean(size_t i) const {
  const Value& v = (*this)[i];
  if (!v.is(ValueKind::Bool)) fail(i, "expected a bool, got " + v.describe());
  return v.as_bool();
}

at::Scalar OpArgs::scalar(size_t i) const {
  const Value& v = (*this)[i];
  switch (v.kind()) {
    case ValueKind::Int:
      return at::Scalar(v.as_int());
    case ValueKind::Double:
      return at::Scalar(v.as_double());
    case ValueKind::Bool:
      return at::Scalar(v.as_bool());
    default:
      fail(i, "expected a number, got " + v.describe());
  }
}

std::vector<int64_t> OpArgs::int_list(size_t i) const {
  const Value& v = (*this)[i];
  if (v.is(ValueKind::Int)) return {v.as_int()};
  if (!v.is(ValueKind::List)) fail(i, "expected an int or a list of ints, got " + v.describe());
  std::vector<int64_t> out;
  out.reserve(v.as_list().size());
  for (const Value& x : v.as_list()) {
    if (!x.is(ValueKind::Int)) fail(i, "expected a list of ints, found " + x.describe());
    out.push_back(x.as_int());
  }
  return out;
}

std::optional<std::vector<int64_t>> OpArgs::opt_int_list(size_t i) const {
  if ((*this)[i].is_none()) return std::nullopt;
  return int_list(i);
}

at::ScalarType OpArgs::dtype(size_t i) const {
  const Value& v = (*this)[i];
  if (!v.is(ValueKind::Dtype)) fail(i, "expected a dtype, got " + v.describe());
  return v.as_dtype();
}

const std::string& OpArgs::string(size_t i) const {
  const Value& v = (*this)[i];
  if (!v.is(ValueKind::String)) fail(i, "expected a string, got " + v.describe());
  return v.as_string();
}

}  // namespace nnsight::dsl
