#include "dsl/value.h"

#include "dsl/dtype.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>

#include <cstring>
#include <sstream>

namespace nnsight::dsl {

IndexItem IndexItem::make_int(int64_t i) {
  IndexItem it;
  it.kind = Kind::Int;
  it.integer = i;
  return it;
}
IndexItem IndexItem::make_slice(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  IndexItem it;
  it.kind = Kind::Slice;
  it.start = start;
  it.stop = stop;
  it.step = step;
  return it;
}
IndexItem IndexItem::make_ellipsis() {
  IndexItem it;
  it.kind = Kind::Ellipsis;
  return it;
}
IndexItem IndexItem::make_none() {
  IndexItem it;
  it.kind = Kind::None;
  return it;
}
IndexItem IndexItem::make_tensor(at::Tensor t) {
  IndexItem it;
  it.kind = Kind::Tensor;
  it.tensor = std::move(t);
  return it;
}

Value::Value(at::Tensor t) {
  if (t.defined()) v_ = std::move(t);
}
Value Value::integer(int64_t v) {
  Value r;
  r.v_ = v;
  return r;
}
Value Value::real(double v) {
  Value r;
  r.v_ = v;
  return r;
}
Value Value::boolean(bool v) {
  Value r;
  r.v_ = v;
  return r;
}
Value Value::list(std::vector<Value> items) {
  Value r;
  r.v_ = std::move(items);
  return r;
}
Value Value::tuple(std::vector<at::Tensor> items) {
  Value r;
  r.v_ = TensorTuple{std::move(items)};
  return r;
}
Value Value::index(IndexSpec spec) {
  Value r;
  r.v_ = std::move(spec);
  return r;
}
Value Value::dtype(at::ScalarType t) {
  Value r;
  r.v_ = t;
  return r;
}
Value Value::string(std::string s) {
  Value r;
  r.v_ = std::move(s);
  return r;
}

namespace {
[[noreturn]] void wrong_kind(const Value& v, const char* expected) {
  throw Error(std::string("expected ") + expected + ", got " + v.describe());
}
}  // namespace

const at::Tensor& Value::as_tensor() const {
  if (!is_tensor()) wrong_kind(*this, "a tensor");
  return std::get<at::Tensor>(v_);
}
at::Tensor& Value::as_tensor() {
  if (!is_tensor()) wrong_kind(*this, "a tensor");
  return std::get<at::Tensor>(v_);
}
int64_t Value::as_int() const {
  if (is(ValueKind::Bool)) return std::get<bool>(v_) ? 1 : 0;
  if (!is(ValueKind::Int)) wrong_kind(*this, "an int");
  return std::get<int64_t>(v_);
}
double Value::as_double() const {
  switch (kind()) {
    case ValueKind::Double:
      return std::get<double>(v_);
    case ValueKind::Int:
      return static_cast<double>(std::get<int64_t>(v_));
    case ValueKind::Bool:
      return std::get<bool>(v_) ? 1.0 : 0.0;
    default:
      wrong_kind(*this, "a number");
  }
}
bool Value::as_bool() const {
  if (!is(ValueKind::Bool)) wrong_kind(*this, "a bool");
  return std::get<bool>(v_);
}
const std::vector<Value>& Value::as_list() const {
  if (!is(ValueKind::List)) wrong_kind(*this, "a list");
  return std::get<std::vector<Value>>(v_);
}
std::vector<Value>& Value::as_list() {
  if (!is(ValueKind::List)) wrong_kind(*this, "a list");
  return std::get<std::vector<Value>>(v_);
}
const std::vector<at::Tensor>& Value::as_tuple() const {
  if (!is(ValueKind::Tuple)) wrong_kind(*this, "a tuple");
  return std::get<TensorTuple>(v_).items;
}
std::vector<at::Tensor>& Value::as_tuple() {
  if (!is(ValueKind::Tuple)) wrong_kind(*this, "a tuple");
  return std::get<TensorTuple>(v_).items;
}
const IndexSpec& Value::as_index() const {
  if (!is(ValueKind::Index)) wrong_kind(*this, "an index");
  return std::get<IndexSpec>(v_);
}
at::ScalarType Value::as_dtype() const {
  if (!is(ValueKind::Dtype)) wrong_kind(*this, "a dtype");
  return std::get<at::ScalarType>(v_);
}
const std::string& Value::as_string() const {
  if (!is(ValueKind::String)) wrong_kind(*this, "a string");
  return std::get<std::string>(v_);
}

namespace {
std::string describe_tensor(const at::Tensor& t) {
  if (!t.defined()) return "none";
  std::ostringstream os;
  os << "tensor " << dtype_name(t.scalar_type()) << "[";
  for (int64_t d = 0; d < t.dim(); ++d) os << (d ? ", " : "") << t.size(d);
  os << "]";
  return os.str();
}
}  // namespace

std::string Value::describe() const {
  switch (kind()) {
    case ValueKind::None:
      return "none";
    case ValueKind::Tensor:
      return describe_tensor(std::get<at::Tensor>(v_));
    case ValueKind::Int:
      return "int " + std::to_string(std::get<int64_t>(v_));
    case ValueKind::Double: {
      std::ostringstream os;
      os << "double " << std::get<double>(v_);
      return os.str();
    }
    case ValueKind::Bool:
      return std::get<bool>(v_) ? "bool true" : "bool false";
    case ValueKind::List:
      return "list of " + std::to_string(as_list().size()) + " values";
    case ValueKind::Tuple:
      return "tuple of " + std::to_string(as_tuple().size()) + " tensors";
    case ValueKind::Index:
      return "index of " + std::to_string(as_index().size()) + " items";
    case ValueKind::Dtype:
      return "dtype " + dtype_name(as_dtype());
    case ValueKind::String:
      return "string \"" + as_string() + "\"";
  }
  return "?";
}

bool identical_tensors(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  at::Tensor ca = a.contiguous().cpu();
  at::Tensor cb = b.contiguous().cpu();
  size_t n = static_cast<size_t>(ca.numel()) * ca.element_size();
  return n == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), n) == 0;
}

bool identical(const IndexItem& a, const IndexItem& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case IndexItem::Kind::Int:
      return a.integer == b.integer;
    case IndexItem::Kind::Slice:
      return a.start == b.start && a.stop == b.stop && a.step == b.step;
    case IndexItem::Kind::Ellipsis:
    case IndexItem::Kind::None:
      return true;
    case IndexItem::Kind::Tensor:
      return identical_tensors(a.tensor, b.tensor);
  }
  return false;
}

bool identical(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::None:
      return true;
    case ValueKind::Tensor:
      return identical_tensors(a.as_tensor(), b.as_tensor());
    case ValueKind::Int:
      return a.as_int() == b.as_int();
    case ValueKind::Double: {
      double x = a.as_double(), y = b.as_double();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case ValueKind::Bool:
      return a.as_bool() == b.as_bool();
    case ValueKind::List: {
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!identical(x[i], y[i])) return false;
      return true;
    }
    case ValueKind::Tuple: {
      const auto &x = a.as_tuple(), &y = b.as_tuple();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!identical_tensors(x[i], y[i])) return false;
      return true;
    }
    case ValueKind::Index: {
      const auto &x = a.as_index(), &y = b.as_index();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!identical(x[i], y[i])) return false;
      return true;
    }
    case ValueKind::Dtype:
      return a.as_dtype() == b.as_dtype();
    case ValueKind::String:
      return a.as_string() == b.as_string();
  }
  return false;
}

namespace {
uint64_t bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<uint64_t>(t.numel()) * t.element_size() : 0; }
}  // namespace

uint64_t tensor_bytes(const Value& v) {
  switch (v.kind()) {
    case ValueKind::Tensor:
      return bytes_of(v.as_tensor());
    case ValueKind::List: {
      uint64_t n = 0;
      for (const auto& x : v.as_list()) n += tensor_bytes(x);
      return n;
    }
    case ValueKind::Tuple: {
      uint64_t n = 0;
      for (const auto& t : v.as_tuple()) n += bytes_of(t);
      return n;
    }
    case ValueKind::Index: {
      uint64_t n = 0;
      for (const auto& it : v.as_index())
        if (it.kind == IndexItem::Kind::Tensor) n += bytes_of(it.tensor);
      return n;
    }
    default:
      return 0;
  }
}

}  // namespace nnsight::dsl
