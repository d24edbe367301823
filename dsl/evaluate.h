// The evaluator: a plain interpreter that runs a validated graph against a
// Provider, in program order, calling the provider synchronously.
//
// It is built to run inside a fiber (the tracing layer's mediator):
// Provider::get/set may suspend the fiber until the model reaches the asked-
// for point; the evaluator keeps no thread-local state across those calls;
// and it catches only std::exception-derived types and its own signals, so
// boost::context's forced_unwind (which unwinds a destroyed fiber) passes
// through untouched.
//
// Semantics (docs/ir.md has the full story):
//   - Iter runs its body once per step of its range; Get/Set with an
//     iteration-relative step address that step (+ offset). An `all` Iter ends
//     cleanly when the provider throws RequestFinished; saves made so far stay.
//     RequestFinished anywhere else (outside every `all` Iter) is an error.
//   - Cond runs its then-body when the value is true (bool, nonzero number,
//     one-element nonzero tensor, non-empty list/string), else its else-body.
//   - Stop calls Provider::stop() and ends the evaluation (status Stopped).
//   - A node referenced after the block that computes it did not run is an
//     error; after a loop it holds the value from the last iteration.
//   - Const tensors are copied when the graph contains a setitem, so an in-
//     place assignment never changes the graph's constants.
//   - Backward hands the provider the metric and the current values of the
//     nodes Grad nodes name; Grad then reads the gradient of its node from
//     the latest Backward (an error when none ran since that node's value was
//     computed).
//   - Errors come back as EvalError naming the node, op and source location.
#pragma once

#include "dsl/errors.h"
#include "dsl/function_registry.h"
#include "dsl/validate.h"
#include "dsl/value.h"

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight::dsl {

class Provider {
 public:
  virtual ~Provider() = default;
  // The value of `key` at generation step `step` (0 = the prefill step). May
  // block until the model produces it. Throws RequestFinished when the
  // request ended before that step, ValueNeverProvided when it will never come.
  // `key` is the graph's own (it lives as long as the graph).
  virtual Value get(const ProviderKey& key, int64_t step) = 0;
  // Makes the model use `value` for `key` at `step` (same exceptions as get).
  virtual void set(const ProviderKey& key, int64_t step, Value value) = 0;
  // A Save node ran. The value is passed as computed (a tensor may be a view of
  // a model activation): clone what must outlive the current step.
  virtual void save(const std::string& name, const Value& value, SaveMode mode) = 0;
  // The value node `node` of the earlier invoke `invoke` computed. The default
  // throws ValueNeverProvided (no cross-invoke references supported).
  virtual Value external(uint32_t invoke, NodeId node);
  // A Stop node ran: the request should end after the current step.
  virtual void stop() {}
  // A Call node: the model's module `module` run on `arg` (a tensor) with the
  // worker's weights. The default throws (no model behind this provider).
  virtual Value call(const std::string& module, const Value& arg);
  // A Backward node: the gradients of `metric` (one element) with respect to
  // each of `inputs` (values the graph read from the model), zeros where it
  // does not depend on one. The default throws (no model behind this provider).
  virtual std::vector<at::Tensor> backward(const at::Tensor& metric, const std::vector<at::Tensor>& inputs);
};

struct EvalOptions {
  const FunctionRegistry* functions = nullptr;  // what Apply nodes may call

  EvalOptions& with_functions(const FunctionRegistry* f) {
    functions = f;
    return *this;
  }
};

enum class EvalStatus { Completed, Stopped };

class Evaluator {
 public:
  // The graph, provider and registry must outlive the evaluator.
  Evaluator(const ValidatedGraph& graph, Provider& provider, EvalOptions options = EvalOptions());

  // Runs the graph once. Throws EvalError.
  EvalStatus run();

  // A node's latest value (for cross-invoke references of later invokes).
  bool has_value(NodeId id) const { return id < computed_.size() && computed_[id]; }
  const Value& value(NodeId id) const;

 private:
  void run_range(NodeId begin, NodeId end);
  void run_iter(NodeId id);
  void exec(NodeId id);
  const Value& arg(NodeId id, size_t k);
  int64_t resolve_step(const StepSpec& s) const;
  bool truthy(NodeId id, const Value& v) const;
  Value fresh_const(const Value& v) const;
  [[noreturn]] void fail(NodeId id, const std::string& what) const;

  const ValidatedGraph& g_;
  Provider& provider_;
  EvalOptions options_;
  std::vector<Value> values_;
  std::vector<uint8_t> computed_;
  std::vector<int64_t> iter_steps_;    // current step of each enclosing Iter, innermost last
  std::vector<const Value*> scratch_;  // op arguments, reused
  bool copy_consts_ = false;
  std::vector<NodeId> grad_sources_;  // nodes whose gradient a Grad node reads
  std::vector<Value> grads_;          // per node: its gradient from the latest Backward (sized when used)
  bool ran_ = false;
};

// Runs a validated graph once.
EvalStatus evaluate(const ValidatedGraph& graph, Provider& provider, const EvalOptions& options = EvalOptions());

}  // namespace nnsight::dsl
