// Value: what one graph node evaluates to, and what a constant node carries.
// A provider hands module inputs/outputs in as a tensor or a tuple of tensors;
// the tracing layer converts to and from its own types at that boundary.
#pragma once

#include "dsl/value_kind.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace nnsight::dsl {

// One element of an index expression x[a, b, ...], with Python's meaning.
struct IndexItem {
  enum class Kind : uint8_t { Int = 0, Slice = 1, Ellipsis = 2, None = 3, Tensor = 4 };
  Kind kind = Kind::Int;
  int64_t integer = 0;           // Int
  std::optional<int64_t> start;  // Slice: nullopt is an open bound, negatives count from the end
  std::optional<int64_t> stop;   // Slice
  int64_t step = 1;              // Slice: > 0
  at::Tensor tensor;             // Tensor: a boolean mask or integer indices

  static IndexItem make_int(int64_t i);
  static IndexItem make_slice(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1);
  static IndexItem make_ellipsis();
  static IndexItem make_none();
  static IndexItem make_tensor(at::Tensor t);
};
using IndexSpec = std::vector<IndexItem>;

// A tuple of tensors (a module's tuple output). Kept apart from List so that a
// provider value round-trips as the same kind.
struct TensorTuple {
  std::vector<at::Tensor> items;
};

class Value {
 public:
  Value() = default;  // None
  // Implicit so that op implementations can `return at::softmax(...)`.
  // An undefined tensor becomes None.
  Value(at::Tensor t);  // NOLINT(google-explicit-constructor)

  static Value none() { return Value(); }
  static Value integer(int64_t v);
  static Value real(double v);
  static Value boolean(bool v);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<at::Tensor> items);
  static Value index(IndexSpec spec);
  static Value dtype(at::ScalarType t);
  static Value string(std::string s);

  ValueKind kind() const { return static_cast<ValueKind>(v_.index()); }
  bool is(ValueKind k) const { return kind() == k; }
  bool is_none() const { return is(ValueKind::None); }
  bool is_tensor() const { return is(ValueKind::Tensor); }
  bool is_number() const { return is(ValueKind::Int) || is(ValueKind::Double) || is(ValueKind::Bool); }

  // Checked accessors: throw nnsight::Error naming the expected and actual kind.
  const at::Tensor& as_tensor() const;
  at::Tensor& as_tensor();
  int64_t as_int() const;
  double as_double() const;  // also accepts int and bool
  bool as_bool() const;
  const std::vector<Value>& as_list() const;
  std::vector<Value>& as_list();
  const std::vector<at::Tensor>& as_tuple() const;
  std::vector<at::Tensor>& as_tuple();
  const IndexSpec& as_index() const;
  at::ScalarType as_dtype() const;
  const std::string& as_string() const;

  // "tensor float32[2, 3]", "int 5", "list of 3 values", ... for messages.
  std::string describe() const;

 private:
  // Alternative order = ValueKind order.
  std::variant<std::monostate, at::Tensor, int64_t, double, bool, std::vector<Value>, TensorTuple, IndexSpec,
               at::ScalarType, std::string>
      v_;
};

// Exact equality: same kind, same dtype/shape/bytes for tensors, same bits for
// doubles (so NaN equals NaN and -0.0 differs from 0.0). For tests and checks.
bool identical(const Value& a, const Value& b);
bool identical(const IndexItem& a, const IndexItem& b);
// Tensors with the same dtype, shape and bytes (both undefined also counts).
bool identical_tensors(const at::Tensor& a, const at::Tensor& b);

// Bytes of tensor data a value carries (recursively): what the constant-size
// limit counts.
uint64_t tensor_bytes(const Value& v);

}  // namespace nnsight::dsl
