// Arithmetic and comparisons: tensors broadcast as in LibTorch, numbers mix in
// on either side (with LibTorch's type promotion), and two numbers compute a
// number with Python's rules (int op int stays int, / is true division).
#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>

#include <cmath>

namespace nnsight::dsl {
namespace {

enum class Bin { Add, Sub, Mul, Div, Pow, Lt, Le, Gt, Ge, Eq, Ne };

bool is_compare(Bin op) { return op >= Bin::Lt; }

// LibTorch on (tensor, tensor) and (tensor, scalar).
at::Tensor tensor_tensor(Bin op, const at::Tensor& a, const at::Tensor& b) {
  switch (op) {
    case Bin::Add:
      return at::add(a, b);
    case Bin::Sub:
      return at::sub(a, b);
    case Bin::Mul:
      return at::mul(a, b);
    case Bin::Div:
      return at::div(a, b);
    case Bin::Pow:
      return at::pow(a, b);
    case Bin::Lt:
      return at::lt(a, b);
    case Bin::Le:
      return at::le(a, b);
    case Bin::Gt:
      return at::gt(a, b);
    case Bin::Ge:
      return at::ge(a, b);
    case Bin::Eq:
      return at::eq(a, b);
    case Bin::Ne:
      return at::ne(a, b);
  }
  TORCH_CHECK(false, "unreachable");
}

at::Tensor tensor_scalar(Bin op, const at::Tensor& a, const at::Scalar& b) {
  switch (op) {
    case Bin::Add:
      return at::add(a, b);
    case Bin::Sub:
      return at::sub(a, b);
    case Bin::Mul:
      return at::mul(a, b);
    case Bin::Div:
      return at::div(a, b);
    case Bin::Pow:
      return at::pow(a, b);
    case Bin::Lt:
      return at::lt(a, b);
    case Bin::Le:
      return at::le(a, b);
    case Bin::Gt:
      return at::gt(a, b);
    case Bin::Ge:
      return at::ge(a, b);
    case Bin::Eq:
      return at::eq(a, b);
    case Bin::Ne:
      return at::ne(a, b);
  }
  TORCH_CHECK(false, "unreachable");
}

at::Tensor scalar_tensor(Bin op, const at::Scalar& a, const at::Tensor& b) {
  switch (op) {
    case Bin::Add:
      return at::add(b, a);
    case Bin::Sub:
      return at::rsub(b, a);
    case Bin::Mul:
      return at::mul(b, a);
    case Bin::Div:
      // a / b: a 0-dim tensor of the promoted type keeps LibTorch's promotion.
      return at::div(at::scalar_tensor(a, b.options().dtype(at::result_type(b, a))), b);
    case Bin::Pow:
      return at::pow(a, b);
    case Bin::Lt:
      return at::gt(b, a);
    case Bin::Le:
      return at::ge(b, a);
    case Bin::Gt:
      return at::lt(b, a);
    case Bin::Ge:
      return at::le(b, a);
    case Bin::Eq:
      return at::eq(b, a);
    case Bin::Ne:
      return at::ne(b, a);
  }
  TORCH_CHECK(false, "unreachable");
}

bool is_int_like(const Value& v) { return v.is(ValueKind::Int) || v.is(ValueKind::Bool); }

[[noreturn]] void overflow(const char* what) { throw Error(std::string("integer overflow in ") + what); }

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1)
      if (__builtin_mul_overflow(result, base, &result)) overflow("pow");
    exp >>= 1;
    if (exp && __builtin_mul_overflow(base, base, &base)) overflow("pow");
  }
  return result;
}

// Python semantics on two numbers.
Value number_number(Bin op, const Value& a, const Value& b) {
  if (is_compare(op)) {
    bool r;
    if (is_int_like(a) && is_int_like(b)) {
      int64_t x = a.as_int(), y = b.as_int();
      r = op == Bin::Lt   ? x < y
          : op == Bin::Le ? x <= y
          : op == Bin::Gt ? x > y
          : op == Bin::Ge ? x >= y
          : op == Bin::Eq ? x == y
                          : x != y;
    } else {
      double x = a.as_double(), y = b.as_double();
      r = op == Bin::Lt   ? x < y
          : op == Bin::Le ? x <= y
          : op == Bin::Gt ? x > y
          : op == Bin::Ge ? x >= y
          : op == Bin::Eq ? x == y
                          : x != y;
    }
    return Value::boolean(r);
  }
  if (op == Bin::Div) {
    double y = b.as_double();
    if (y == 0) throw Error("division by zero");
    return Value::real(a.as_double() / y);
  }
  if (is_int_like(a) && is_int_like(b)) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    switch (op) {
      case Bin::Add:
        if (__builtin_add_overflow(x, y, &r)) overflow("add");
        return Value::integer(r);
      case Bin::Sub:
        if (__builtin_sub_overflow(x, y, &r)) overflow("sub");
        return Value::integer(r);
      case Bin::Mul:
        if (__builtin_mul_overflow(x, y, &r)) overflow("mul");
        return Value::integer(r);
      case Bin::Pow:
        if (y >= 0) return Value::integer(int_pow(x, y));
        if (x == 0) throw Error("zero to a negative power");
        return Value::real(std::pow(static_cast<double>(x), static_cast<double>(y)));
      default:
        break;
    }
  }
  double x = a.as_double(), y = b.as_double();
  switch (op) {
    case Bin::Add:
      return Value::real(x + y);
    case Bin::Sub:
      return Value::real(x - y);
    case Bin::Mul:
      return Value::real(x * y);
    case Bin::Pow:
      return Value::real(std::pow(x, y));
    default:
      break;
  }
  TORCH_CHECK(false, "unreachable");
}

at::Scalar as_scalar(const Value& v) {
  if (v.is(ValueKind::Int)) return at::Scalar(v.as_int());
  if (v.is(ValueKind::Bool)) return at::Scalar(v.as_bool());
  return at::Scalar(v.as_double());
}

template <Bin op>
Value binary(const OpArgs& a) {
  const Value& x = a[0];
  const Value& y = a[1];
  if (x.is_tensor() && y.is_tensor()) return tensor_tensor(op, x.as_tensor(), y.as_tensor());
  if (x.is_tensor() && y.is_number()) return tensor_scalar(op, x.as_tensor(), as_scalar(y));
  if (x.is_number() && y.is_tensor()) return scalar_tensor(op, as_scalar(x), y.as_tensor());
  if (x.is_number() && y.is_number()) return number_number(op, x, y);
  if (!x.is_tensor() && !x.is_number()) a.fail(0, "expected a tensor or a number, got " + x.describe());
  a.fail(1, "expected a tensor or a number, got " + y.describe());
}

// Tensor if any argument may be one; a number if all may be numbers.
KindMask arith_result(const KindMask* args, size_t n) {
  KindMask r = 0;
  bool all_number = true;
  for (size_t i = 0; i < n; ++i) {
    if (args[i] & kinds::Tensor) r |= kinds::Tensor;
    if (!(args[i] & kinds::Number)) all_number = false;
  }
  if (all_number) r |= kinds::Int | kinds::Double;
  return r;
}
KindMask div_result(const KindMask* args, size_t n) {
  KindMask r = arith_result(args, n);
  return (r & kinds::Tensor) | ((r & kinds::Number) ? kinds::Double : 0);
}
KindMask compare_result(const KindMask* args, size_t n) {
  KindMask r = arith_result(args, n);
  return (r & kinds::Tensor) | ((r & kinds::Number) ? kinds::Bool : 0);
}

Value neg(const OpArgs& a) {
  const Value& x = a[0];
  if (x.is_tensor()) return at::neg(x.as_tensor());
  if (x.is(ValueKind::Double)) return Value::real(-x.as_double());
  if (is_int_like(x)) {
    int64_t r;
    if (__builtin_sub_overflow(int64_t{0}, x.as_int(), &r)) overflow("neg");
    return Value::integer(r);
  }
  a.fail(0, "expected a tensor or a number, got " + x.describe());
}

}  // namespace

void register_arith_ops(OpRegistry& r) {
  struct B {
    const char* name;
    const char* doc;
    OpFn fn;
    ResultKindFn result;
  };
  const B ops[] = {
      {"add", "at::add(self, other); a number on either side", binary<Bin::Add>, arith_result},
      {"sub", "at::sub(self, other); number - tensor is at::rsub", binary<Bin::Sub>, arith_result},
      {"mul", "at::mul(self, other)", binary<Bin::Mul>, arith_result},
      {"div", "at::div(self, other) (true division)", binary<Bin::Div>, div_result},
      {"pow", "at::pow(self, exponent)", binary<Bin::Pow>, arith_result},
      {"lt", "at::lt(self, other)", binary<Bin::Lt>, compare_result},
      {"le", "at::le(self, other)", binary<Bin::Le>, compare_result},
      {"gt", "at::gt(self, other)", binary<Bin::Gt>, compare_result},
      {"ge", "at::ge(self, other)", binary<Bin::Ge>, compare_result},
      {"eq", "at::eq(self, other)", binary<Bin::Eq>, compare_result},
      {"ne", "at::ne(self, other)", binary<Bin::Ne>, compare_result},
  };
  for (const B& b : ops)
    r.add(b.name, "arith", b.doc).tensor_or_number("self").tensor_or_number("other").returns(b.result).impl(b.fn);
  r.add("neg", "arith", "at::neg(self)").tensor_or_number("self").returns(arith_result).impl(neg);
}

}  // namespace nnsight::dsl
