// OpArgs: the arguments an op implementation receives, with typed accessors
// that apply the op's declared defaults for omitted trailing arguments and
// raise an nnsight::Error naming the parameter when a kind does not fit.
#pragma once

#include "dsl/value.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nnsight::dsl {

struct OpDef;

class OpArgs {
 public:
  // `args` points at n values (owned by the evaluator) for op `def`.
  OpArgs(const OpDef& def, const Value* const* args, size_t n) : def_(def), args_(args), n_(n) {}

  // Number of arguments given (defaults not counted).
  size_t size() const { return n_; }
  // Argument i, or the parameter's default when omitted.
  const Value& operator[](size_t i) const;

  const at::Tensor& tensor(size_t i) const;
  int64_t integer(size_t i) const;
  std::optional<int64_t> opt_integer(size_t i) const;  // none -> nullopt
  double real(size_t i) const;                         // int and bool also accepted
  bool boolean(size_t i) const;
  at::Scalar scalar(size_t i) const;                                 // int/double/bool as a Scalar
  std::vector<int64_t> int_list(size_t i) const;                     // an int or a list of ints
  std::optional<std::vector<int64_t>> opt_int_list(size_t i) const;  // none -> nullopt
  at::ScalarType dtype(size_t i) const;
  const std::string& string(size_t i) const;

  [[noreturn]] void fail(size_t i, const std::string& what) const;  // names the parameter

 private:
  const OpDef& def_;
  const Value* const* args_;
  size_t n_;
};

}  // namespace nnsight::dsl
