// Proxy: a value of the model that does not exist yet. Inside a trace body,
// operations on proxies do not compute anything; they record nodes of the
// intervention graph, which runs later next to the model (see docs/ir.md).
//
//   auto h = layer.output();                       // a proxy (recorded by the tracer)
//   auto z = (h * 2 + 1).softmax(-1)[{Slice(), -1}];
//   layer.output() = h * 0;                        // assignment to an output: a set
//   h[{Slice(), 0}] = 0;                           // indexed assignment, in place
//   Saved s = z.save();                            // read after the run
//
// Plain at::Tensor values and numbers mix in as constants. Every recorded node
// keeps the user's file and line: methods take a trailing CallSite, operands
// (Operand, IndexArg) capture theirs when they are converted, so
// `a + b` on line 12 records line 12.
//
// Lifetime: a proxy holds its graph builder; using it after its trace ended
// (or in another trace) raises nnsight::Error.
#pragma once

#include <nnsight/call_site.hpp>
#include <nnsight/index.hpp>
#include <nnsight/saved.hpp>
#include <nnsight/tensor_operators.hpp>  // two plain tensors compute, never record

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace nnsight {

namespace dsl {
class GraphBuilder;
}  // namespace dsl

class Operand;
class IndexArg;

class Proxy {
 public:
  Proxy() = default;
  // For the tracing layer: node `node` of `builder`.
  Proxy(std::shared_ptr<dsl::GraphBuilder> builder, uint32_t node);

  Proxy(const Proxy&) = default;
  Proxy(Proxy&&) noexcept = default;
  ~Proxy() = default;
  // Rebinding a named proxy, as in Python: `h = h * 2`.
  Proxy& operator=(const Proxy&) & = default;
  Proxy& operator=(Proxy&&) & noexcept = default;
  // Assigning to a temporary proxy records a write:
  //   envoy.output() = value   a set of the provider value the proxy was read from
  //   x[index] = value         an in-place indexed assignment into x
  // Any other temporary raises nnsight::Error.
  void operator=(const Operand& value) &&;

  bool valid() const { return builder_ != nullptr; }
  uint32_t node() const { return node_; }
  const std::shared_ptr<dsl::GraphBuilder>& builder() const { return builder_; }

  // ---- indexing ----
  Proxy operator[](const IndexArg& index) const;
  Proxy operator[](std::initializer_list<IndexArg> index) const;
  Proxy index(std::initializer_list<IndexArg> index, CallSite site = CallSite()) const;
  // x[index] = value, in place (x is mutated; a proxy of a model activation
  // changes the activation).
  void index_put(std::initializer_list<IndexArg> index, const Operand& value, CallSite site = CallSite()) const;

  // ---- copies and conversions ----
  Proxy clone(CallSite site = CallSite()) const;
  Proxy detach(CallSite site = CallSite()) const;
  Proxy to(at::ScalarType dtype, CallSite site = CallSite()) const;
  Proxy contiguous(CallSite site = CallSite()) const;
  Proxy item(CallSite site = CallSite()) const;  // an int, double or bool

  // ---- shape ----
  Proxy reshape(std::vector<int64_t> shape, CallSite site = CallSite()) const;
  Proxy view(std::vector<int64_t> shape, CallSite site = CallSite()) const;
  Proxy transpose(int64_t dim0, int64_t dim1, CallSite site = CallSite()) const;
  Proxy permute(std::vector<int64_t> dims, CallSite site = CallSite()) const;
  Proxy unsqueeze(int64_t dim, CallSite site = CallSite()) const;
  Proxy squeeze(CallSite site = CallSite()) const;
  Proxy squeeze(int64_t dim, CallSite site = CallSite()) const;
  Proxy flatten(int64_t start_dim = 0, int64_t end_dim = -1, CallSite site = CallSite()) const;
  Proxy size(int64_t dim, CallSite site = CallSite()) const;  // an int

  // ---- reductions ----
  Proxy sum(CallSite site = CallSite()) const;
  Proxy sum(int64_t dim, bool keepdim = false, CallSite site = CallSite()) const;
  Proxy sum(std::vector<int64_t> dims, bool keepdim = false, CallSite site = CallSite()) const;
  Proxy mean(CallSite site = CallSite()) const;
  Proxy mean(int64_t dim, bool keepdim = false, CallSite site = CallSite()) const;
  Proxy mean(std::vector<int64_t> dims, bool keepdim = false, CallSite site = CallSite()) const;
  Proxy max(CallSite site = CallSite()) const;
  Proxy max(int64_t dim, bool keepdim = false, CallSite site = CallSite()) const;  // (values, indices)
  Proxy min(CallSite site = CallSite()) const;
  Proxy min(int64_t dim, bool keepdim = false, CallSite site = CallSite()) const;  // (values, indices)
  Proxy argmax(CallSite site = CallSite()) const;
  Proxy argmax(int64_t dim, bool keepdim = false, CallSite site = CallSite()) const;
  Proxy topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true,
             CallSite site = CallSite()) const;  // (values, indices)
  Proxy norm(double p = 2.0, CallSite site = CallSite()) const;
  Proxy norm(double p, std::vector<int64_t> dims, bool keepdim = false, CallSite site = CallSite()) const;

  // ---- elementwise and normalisation ----
  Proxy abs(CallSite site = CallSite()) const;
  Proxy exp(CallSite site = CallSite()) const;
  Proxy log(CallSite site = CallSite()) const;
  Proxy sqrt(CallSite site = CallSite()) const;
  Proxy tanh(CallSite site = CallSite()) const;
  Proxy sigmoid(CallSite site = CallSite()) const;
  Proxy relu(CallSite site = CallSite()) const;
  Proxy gelu(const std::string& approximate = "none", CallSite site = CallSite()) const;
  Proxy softmax(int64_t dim, CallSite site = CallSite()) const;
  Proxy log_softmax(int64_t dim, CallSite site = CallSite()) const;
  Proxy pow(const Operand& exponent) const;
  Proxy matmul(const Operand& other) const;

  // Comparisons as methods (the operators below do the same).
  Proxy eq(const Operand& other) const;
  Proxy ne(const Operand& other) const;
  Proxy lt(const Operand& other) const;
  Proxy le(const Operand& other) const;
  Proxy gt(const Operand& other) const;
  Proxy ge(const Operand& other) const;

  // ---- gradients (docs/gradients.md) ----
  // The gradient of this value -- a module's .output()/.input(), an element
  // of its tuple, or logits, as read -- from the latest backward() before
  // this point: read it after calling backward().
  Proxy grad(CallSite site = CallSite()) const;
  // Backpropagates this one-element value through the model's forward of this
  // step (NNsight's metric.backward()); the trace then runs with autograd.
  void backward(CallSite site = CallSite()) const;

  // ---- saving ----
  // The value of this proxy, read after the run through the returned handle.
  // Inside an iteration the last value wins.
  Saved save(CallSite site = CallSite()) const;
  Saved save(const std::string& name, CallSite site = CallSite()) const;
  // The value every time this point runs (e.g. once per iteration): a list.
  Saved save_each(CallSite site = CallSite()) const;
  Saved save_each(const std::string& name, CallSite site = CallSite()) const;

 private:
  friend class ProxyAccess;
  std::shared_ptr<dsl::GraphBuilder> builder_;
  uint32_t node_ = 0;
  // Set when this proxy is base[index]: an assignment to it writes into base.
  bool indexed_ = false;
  uint32_t index_base_ = 0;
  uint32_t index_node_ = 0;
};

// An operand of a recorded operation: a proxy, a tensor (recorded as a
// constant) or a number. Converting to it captures the caller's file/line.
class Operand {
 public:
  enum class Kind : uint8_t { Proxy, Tensor, Int, Double, Bool };

  Operand(const nnsight::Proxy& p, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::Proxy), proxy_(p), site_(CallSite::at(file, line)) {}
  Operand(const at::Tensor& t, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::Tensor), tensor_(t), site_(CallSite::at(file, line)) {}
  template <typename T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
  Operand(T v, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(std::is_same<T, bool>::value ? Kind::Bool
              : std::is_integral<T>::value ? Kind::Int
                                           : Kind::Double),
        int_(static_cast<int64_t>(v)),
        double_(static_cast<double>(v)),
        site_(CallSite::at(file, line)) {}

  Kind kind() const { return kind_; }
  const nnsight::Proxy& proxy() const { return proxy_; }
  const at::Tensor& tensor() const { return tensor_; }
  int64_t int_value() const { return int_; }
  double double_value() const { return double_; }
  bool bool_value() const { return int_ != 0; }
  const CallSite& site() const { return site_; }

 private:
  Kind kind_;
  nnsight::Proxy proxy_;
  at::Tensor tensor_;
  int64_t int_ = 0;
  double double_ = 0;
  CallSite site_;
};

// One element of an index: an integer, Slice, Ellipsis, None, a tensor (mask
// or indices) or a proxy of one. Captures the caller's file/line.
class IndexArg {
 public:
  enum class Kind : uint8_t { Int, Slice, Ellipsis, None, Tensor, Proxy };

  template <typename T, std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value, int> = 0>
  IndexArg(T i, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::Int), int_(static_cast<int64_t>(i)), site_(CallSite::at(file, line)) {}
  IndexArg(const nnsight::Slice& s, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::Slice), slice_(s), site_(CallSite::at(file, line)) {}
  IndexArg(EllipsisT, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::Ellipsis), site_(CallSite::at(file, line)) {}
  IndexArg(NoneT, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::None), site_(CallSite::at(file, line)) {}
  IndexArg(const at::Tensor& t, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::Tensor), tensor_(t), site_(CallSite::at(file, line)) {}
  IndexArg(const nnsight::Proxy& p, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : kind_(Kind::Proxy), proxy_(p), site_(CallSite::at(file, line)) {}

  Kind kind() const { return kind_; }
  int64_t int_value() const { return int_; }
  const nnsight::Slice& slice() const { return slice_; }
  const at::Tensor& tensor() const { return tensor_; }
  const nnsight::Proxy& proxy() const { return proxy_; }
  const CallSite& site() const { return site_; }

 private:
  Kind kind_;
  int64_t int_ = 0;
  nnsight::Slice slice_;
  at::Tensor tensor_;
  nnsight::Proxy proxy_;
  CallSite site_;
};

// ---- operators (each records one op node) ----
Proxy operator+(const Operand& a, const Operand& b);
Proxy operator-(const Operand& a, const Operand& b);
Proxy operator*(const Operand& a, const Operand& b);
Proxy operator/(const Operand& a, const Operand& b);
Proxy operator-(const Operand& a);
Proxy operator<(const Operand& a, const Operand& b);
Proxy operator<=(const Operand& a, const Operand& b);
Proxy operator>(const Operand& a, const Operand& b);
Proxy operator>=(const Operand& a, const Operand& b);
Proxy operator==(const Operand& a, const Operand& b);
Proxy operator!=(const Operand& a, const Operand& b);

// ---- free functions ----
Proxy cat(std::initializer_list<Operand> tensors, int64_t dim = 0, CallSite site = CallSite());
Proxy cat(const std::vector<Proxy>& tensors, int64_t dim = 0, CallSite site = CallSite());
Proxy stack(std::initializer_list<Operand> tensors, int64_t dim = 0, CallSite site = CallSite());
Proxy stack(const std::vector<Proxy>& tensors, int64_t dim = 0, CallSite site = CallSite());
Proxy where(const Operand& condition, const Operand& a, const Operand& b);
Proxy matmul(const Operand& a, const Operand& b);
Proxy outer(const Operand& a, const Operand& b);
Proxy zeros_like(const Operand& like);
Proxy ones_like(const Operand& like);
Proxy full_like(const Operand& like, const Operand& fill_value);
// Standard normal numbers shaped like `like`, the same on every process for
// a given seed.
Proxy randn_like(const Operand& like, uint64_t seed);
// A list / tuple value (e.g. to build a module's tuple output for a set).
Proxy make_list(std::initializer_list<Operand> items, CallSite site = CallSite());
Proxy make_tuple(std::initializer_list<Operand> items, CallSite site = CallSite());
// Calls a function the worker registered under `name` (dsl::FunctionRegistry).
Proxy apply(const std::string& name, std::initializer_list<Operand> args, CallSite site = CallSite());
Proxy apply(const std::string& name, const std::vector<Operand>& args, CallSite site = CallSite());

// The model's module at `path` run on x, inside the graph, with the weights of
// the process that runs the model: what `lm.envoy(path)(x)` records.
Proxy call_module(const std::string& path, const Operand& x, CallSite site = CallSite());

}  // namespace nnsight
