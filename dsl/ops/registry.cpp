#include "dsl/ops/registry.h"

#include <cstdint>
#include <stdexcept>

namespace nnsight::dsl {

size_t OpDef::min_args() const {
  size_t n = 0;
  size_t fixed = variadic ? params.size() - 1 : params.size();
  for (size_t i = 0; i < fixed; ++i)
    if (!params[i].default_value) n = i + 1;
  return n;
}

size_t OpDef::max_args() const { return variadic ? SIZE_MAX : params.size(); }

const OpParam& OpDef::param(size_t i) const {
  if (i < params.size()) return params[i];
  if (variadic && !params.empty()) return params.back();
  static const OpParam kNone{"<extra>", kinds::Nothing, std::nullopt};
  return kNone;
}

KindMask OpDef::result_kind(const KindMask* args, size_t n) const { return result_fn ? result_fn(args, n) : result; }

namespace {
// A default value as it would be written: 0, 2.0, false, none, "tanh".
std::string literal(const Value& v) {
  switch (v.kind()) {
    case ValueKind::None:
      return "none";
    case ValueKind::Int:
      return std::to_string(v.as_int());
    case ValueKind::Double: {
      std::string d = std::to_string(v.as_double());
      while (d.size() > 1 && d.back() == '0' && d[d.size() - 2] != '.') d.pop_back();
      return d;
    }
    case ValueKind::Bool:
      return v.as_bool() ? "true" : "false";
    case ValueKind::String:
      return "\"" + v.as_string() + "\"";
    default:
      return v.describe();
  }
}
}  // namespace

std::string OpDef::signature() const {
  std::string s = name + "(";
  for (size_t i = 0; i < params.size(); ++i) {
    if (i) s += ", ";
    if (variadic && i + 1 == params.size()) s += "*";
    s += params[i].name + ": " + describe_mask(params[i].kinds);
    if (params[i].default_value) s += " = " + literal(*params[i].default_value);
  }
  s += ") -> " + (result_fn ? std::string("depends on arguments") : describe_mask(result));
  return s;
}

OpDefBuilder& OpDefBuilder::param(std::string name, KindMask kinds) {
  if (def_.variadic) throw std::logic_error("op " + def_.name + ": parameter after variadic");
  if (!def_.params.empty() && def_.params.back().default_value)
    throw std::logic_error("op " + def_.name + ": required parameter after optional");
  def_.params.push_back(OpParam{std::move(name), kinds, std::nullopt});
  return *this;
}

OpDefBuilder& OpDefBuilder::param(std::string name, KindMask kinds, Value default_value) {
  if (def_.variadic) throw std::logic_error("op " + def_.name + ": parameter after variadic");
  def_.params.push_back(OpParam{std::move(name), kinds, std::move(default_value)});
  return *this;
}

OpDefBuilder& OpDefBuilder::variadic(std::string name, KindMask kinds) {
  if (def_.variadic) throw std::logic_error("op " + def_.name + ": two variadic parameters");
  if (!def_.params.empty() && def_.params.back().default_value)
    throw std::logic_error("op " + def_.name + ": variadic parameter after optional");
  def_.params.push_back(OpParam{std::move(name), kinds, std::nullopt});
  def_.variadic = true;
  return *this;
}

OpDefBuilder& OpDefBuilder::returns(KindMask kinds) {
  def_.result = kinds;
  return *this;
}

OpDefBuilder& OpDefBuilder::returns(ResultKindFn fn) {
  def_.result_fn = fn;
  return *this;
}

OpDefBuilder& OpDefBuilder::impl(OpFn fn) {
  def_.fn = fn;
  return *this;
}

OpDefBuilder OpRegistry::add(std::string name, std::string family, std::string doc) {
  if (by_name_.count(name)) throw std::logic_error("op registered twice: " + name);
  ops_.push_back(OpDef{});
  OpDef& def = ops_.back();
  def.name = std::move(name);
  def.family = std::move(family);
  def.doc = std::move(doc);
  by_name_.emplace(std::string_view(def.name), &def);
  return OpDefBuilder(def);
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {
OpRegistry make_global() {
  OpRegistry r;
  register_arith_ops(r);
  register_index_ops(r);
  register_convert_ops(r);
  register_shape_ops(r);
  register_reduce_ops(r);
  register_activation_ops(r);
  register_linalg_ops(r);
  register_factory_ops(r);
  register_container_ops(r);
  for (const OpDef& d : r.ops())
    if (!d.fn) throw std::logic_error("op without implementation: " + d.name);
  return r;
}
}  // namespace

const OpRegistry& OpRegistry::global() {
  static const OpRegistry r = make_global();
  return r;
}

}  // namespace nnsight::dsl
