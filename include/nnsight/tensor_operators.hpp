// Plain tensor arithmetic beside the recording operators of proxy.hpp.
//
// proxy.hpp's operators take `Operand`, which a plain at::Tensor converts to.
// With `using namespace nnsight;` in effect and without <ATen/ATen.h> (whose
// ATen/TensorOperators.h defines at::operator- and friends), `a - b` on two
// tensors -- say two saved values after a trace -- would resolve to the
// recording operator and fail. These operators compute at once instead, as
// ATen's do. They are templates, so ATen's own non-template operators win
// whenever those are declared: never an ambiguity. Numbers mix in as in
// ATen (the number becomes a Scalar).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <type_traits>

namespace nnsight {
namespace detail {

template <class T>
using IsTensor = std::is_same<T, at::Tensor>;

template <class T>
at::Scalar to_scalar(T v) {
  if constexpr (std::is_same<T, bool>::value)
    return at::Scalar(v);
  else if constexpr (std::is_integral<T>::value)
    return at::Scalar(static_cast<int64_t>(v));
  else
    return at::Scalar(static_cast<double>(v));
}

// x op y for a tensor and a tensor or number; `number op tensor` below.
template <class X, class Y>
using TensorLeft = std::enable_if_t<IsTensor<X>::value && (IsTensor<Y>::value || std::is_arithmetic<Y>::value), int>;
template <class X, class Y>
using NumberLeft = std::enable_if_t<std::is_arithmetic<X>::value && IsTensor<Y>::value, int>;

template <class Y>
decltype(auto) operand(const Y& y) {
  if constexpr (IsTensor<Y>::value)
    return (y);
  else
    return to_scalar(y);
}

// `number op tensor` for the non-commutative ops: the number filled into a
// tensor like y (its dtype), as ATen does.
inline at::Tensor filled_like(const at::Tensor& y, const at::Scalar& x) { return y.new_empty(y.sizes()).fill_(x); }

}  // namespace detail

#define NNSIGHT_TENSOR_OPERATOR(op, body, reverse_body)     \
  template <class X, class Y, detail::TensorLeft<X, Y> = 0> \
  at::Tensor operator op(const X& x, const Y& y) {          \
    const auto& b = detail::operand(y);                     \
    return body;                                            \
  }                                                         \
  template <class X, class Y, detail::NumberLeft<X, Y> = 0> \
  at::Tensor operator op(const X& x, const Y& y) {          \
    const at::Scalar a = detail::to_scalar(x);              \
    return reverse_body;                                    \
  }

NNSIGHT_TENSOR_OPERATOR(+, x.add(b), y.add(a))
NNSIGHT_TENSOR_OPERATOR(*, x.mul(b), y.mul(a))
NNSIGHT_TENSOR_OPERATOR(-, x.sub(b), detail::filled_like(y, a).sub_(y))
NNSIGHT_TENSOR_OPERATOR(/, x.div(b), detail::filled_like(y, a).div_(y))
NNSIGHT_TENSOR_OPERATOR(<, x.lt(b), y.gt(a))
NNSIGHT_TENSOR_OPERATOR(<=, x.le(b), y.ge(a))
NNSIGHT_TENSOR_OPERATOR(>, x.gt(b), y.lt(a))
NNSIGHT_TENSOR_OPERATOR(>=, x.ge(b), y.le(a))
NNSIGHT_TENSOR_OPERATOR(==, x.eq(b), y.eq(a))
NNSIGHT_TENSOR_OPERATOR(!=, x.ne(b), y.ne(a))

#undef NNSIGHT_TENSOR_OPERATOR

}  // namespace nnsight
