#include "dsl/evaluate.h"

#include "dsl/ops/registry.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace nnsight::dsl {
namespace {

// Internal signals: deliberately not std::exception, so that no handler for
// errors mistakes them for one. Both are caught inside Evaluator::run.
struct StopSignal {};
struct FinishedSignal {
  NodeId node;
  int64_t step;
};

Value clone_tensors(const Value& v) {
  switch (v.kind()) {
    case ValueKind::Tensor:
      return Value(v.as_tensor().clone());
    case ValueKind::Tuple: {
      std::vector<at::Tensor> items;
      items.reserve(v.as_tuple().size());
      for (const at::Tensor& t : v.as_tuple()) items.push_back(t.defined() ? t.clone() : t);
      return Value::tuple(std::move(items));
    }
    case ValueKind::List: {
      std::vector<Value> items;
      items.reserve(v.as_list().size());
      for (const Value& x : v.as_list()) items.push_back(clone_tensors(x));
      return Value::list(std::move(items));
    }
    default:
      return v;
  }
}

}  // namespace

Value Provider::external(uint32_t invoke, NodeId node) {
  throw ValueNeverProvided("this provider does not supply values of other invokes (asked for invoke " +
                           std::to_string(invoke) + ", node " + std::to_string(node) + ")");
}

Value Provider::call(const std::string& module, const Value&) {
  throw Error("module '" + module + "' cannot be called here: this provider has no model");
}

std::vector<at::Tensor> Provider::backward(const at::Tensor&, const std::vector<at::Tensor>&) {
  throw Error("backward() cannot run here: this provider has no model");
}

Evaluator::Evaluator(const ValidatedGraph& graph, Provider& provider, EvalOptions options)
    : g_(graph), provider_(provider), options_(options) {
  values_.resize(g_.size());
  computed_.assign(g_.size(), 0);
  for (NodeId i = 0; i < g_.size(); ++i) {
    const OpDef* op = g_.op(i);
    if (op && op->name == "setitem") copy_consts_ = true;
    const Node& n = g_.node(i);
    if (n.kind == NodeKind::Grad &&
        std::find(grad_sources_.begin(), grad_sources_.end(), n.args[0]) == grad_sources_.end())
      grad_sources_.push_back(n.args[0]);
  }
  if (!grad_sources_.empty()) grads_.resize(g_.size());
}

const Value& Evaluator::value(NodeId id) const {
  if (!has_value(id)) throw Error("node " + std::to_string(id) + " has no value (yet)");
  return values_[id];
}

void Evaluator::fail(NodeId id, const std::string& what) const {
  const Node& n = g_.node(id);
  throw EvalError(id, n.loc, n.describe(id) + ": " + what);
}

EvalStatus Evaluator::run() {
  if (ran_) throw Error("an Evaluator runs its graph once");
  ran_ = true;
  try {
    run_range(0, static_cast<NodeId>(g_.size()));
  } catch (const StopSignal&) {
    return EvalStatus::Stopped;
  } catch (const FinishedSignal& f) {
    fail(f.node, "the request finished before step " + std::to_string(f.step) +
                     " (only an iteration over all steps ends quietly when the request does)");
  }
  return EvalStatus::Completed;
}

void Evaluator::run_range(NodeId begin, NodeId end) {
  NodeId i = begin;
  while (i < end) {
    const Node& n = g_.node(i);
    if (n.kind == NodeKind::Iter) {
      run_iter(i);
      i = g_.block_end(i) + 1;
    } else if (n.kind == NodeKind::Cond) {
      NodeId else_at = g_.else_of(i);
      NodeId end_at = g_.block_end(i);
      if (truthy(i, arg(i, 0))) {
        run_range(i + 1, else_at != kNoNode ? else_at : end_at);
      } else if (else_at != kNoNode) {
        run_range(else_at + 1, end_at);
      }
      i = end_at + 1;
    } else {
      exec(i);
      ++i;
    }
  }
}

void Evaluator::run_iter(NodeId id) {
  const IterRange& r = g_.node(id).range;
  NodeId body_end = g_.block_end(id);
  iter_steps_.push_back(r.start);
  for (int64_t step = r.start; r.all || step < r.stop; step += r.stride) {
    iter_steps_.back() = step;
    values_[id] = Value::integer(step);
    computed_[id] = 1;
    if (!r.all) {
      run_range(id + 1, body_end);
      continue;
    }
    try {
      run_range(id + 1, body_end);
    } catch (const FinishedSignal&) {
      break;  // the request ended: an `all` iteration is over
    }
  }
  iter_steps_.pop_back();
}

const Value& Evaluator::arg(NodeId id, size_t k) {
  NodeId a = g_.node(id).args[k];
  if (!computed_[a])
    fail(id, "argument " + std::to_string(k) + " (" + g_.node(a).describe(a) +
                 ") has no value: the block that computes it did not run");
  return values_[a];
}

int64_t Evaluator::resolve_step(const StepSpec& s) const {
  if (s.mode == StepSpec::Mode::Fixed) return s.value;
  return iter_steps_.back() + s.value;  // validated: inside an Iter
}

bool Evaluator::truthy(NodeId id, const Value& v) const {
  switch (v.kind()) {
    case ValueKind::None:
      return false;
    case ValueKind::Bool:
      return v.as_bool();
    case ValueKind::Int:
      return v.as_int() != 0;
    case ValueKind::Double:
      return v.as_double() != 0.0;
    case ValueKind::Tensor: {
      const at::Tensor& t = v.as_tensor();
      if (t.numel() != 1)
        fail(id, "the truth value of a " + v.describe() + " is ambiguous (needs exactly one element)");
      try {
        return at::is_nonzero(t);
      } catch (const c10::Error& e) {
        fail(id, e.what_without_backtrace());
      }
    }
    case ValueKind::List:
      return !v.as_list().empty();
    case ValueKind::Tuple:
      return !v.as_tuple().empty();
    case ValueKind::String:
      return !v.as_string().empty();
    default:
      fail(id, "a " + v.describe() + " has no truth value");
  }
}

Value Evaluator::fresh_const(const Value& v) const { return copy_consts_ ? clone_tensors(v) : v; }

void Evaluator::exec(NodeId id) {
  const Node& n = g_.node(id);
  try {
    switch (n.kind) {
      case NodeKind::Const:
        values_[id] = fresh_const(n.value);
        break;
      case NodeKind::Get: {
        int64_t step = resolve_step(n.step);
        try {
          values_[id] = provider_.get(*n.key, step);
        } catch (const RequestFinished&) {
          throw FinishedSignal{id, step};
        }
        break;
      }
      case NodeKind::Set: {
        int64_t step = resolve_step(n.step);
        const Value& v = arg(id, 0);
        try {
          provider_.set(*n.key, step, v);
        } catch (const RequestFinished&) {
          throw FinishedSignal{id, step};
        }
        break;
      }
      case NodeKind::Op: {
        const OpDef* def = g_.op(id);
        scratch_.clear();
        for (size_t k = 0; k < n.args.size(); ++k) scratch_.push_back(&arg(id, k));
        values_[id] = def->fn(OpArgs(*def, scratch_.data(), scratch_.size()));
        break;
      }
      case NodeKind::Apply: {
        const FunctionDef* f = options_.functions ? options_.functions->find(n.name) : nullptr;
        if (!f) fail(id, "function '" + n.name + "' is not registered on this worker");
        if (n.args.size() < f->min_args || n.args.size() > f->max_args)
          fail(id, "function '" + n.name + "' does not take " + std::to_string(n.args.size()) + " arguments");
        std::vector<Value> args;
        args.reserve(n.args.size());
        for (size_t k = 0; k < n.args.size(); ++k) args.push_back(arg(id, k));
        values_[id] = f->fn(args);
        break;
      }
      case NodeKind::Call: {
        const Value& x = arg(id, 0);
        if (!x.is_tensor()) fail(id, "module '" + n.name + "' takes a tensor, got " + x.describe());
        values_[id] = provider_.call(n.name, x);
        break;
      }
      case NodeKind::Backward: {
        const Value& m = arg(id, 0);
        if (!m.is_tensor() || m.as_tensor().numel() != 1)
          fail(id, "backward() needs a one-element tensor (reduce the metric first), got " + m.describe());
        std::vector<NodeId> sources;
        std::vector<at::Tensor> inputs;
        for (NodeId s : grad_sources_) {
          if (!computed_[s] || !values_[s].is_tensor()) continue;
          sources.push_back(s);
          inputs.push_back(values_[s].as_tensor());
        }
        std::vector<at::Tensor> grads = provider_.backward(m.as_tensor(), inputs);
        TORCH_CHECK(grads.size() == inputs.size(), "Provider::backward returned ", grads.size(), " gradients for ",
                    inputs.size(), " inputs");
        for (size_t k = 0; k < sources.size(); ++k) grads_[sources[k]] = Value(grads[k]);
        break;
      }
      case NodeKind::Grad: {
        const NodeId src = n.args[0];
        if (grads_[src].is_none())
          fail(id, "no gradient of " + g_.node(src).describe(src) +
                       ": no backward() has run since its value was read (backward() a metric computed from it)");
        values_[id] = grads_[src];
        break;
      }
      case NodeKind::Save:
        provider_.save(n.name, arg(id, 0), n.save_mode);
        break;
      case NodeKind::Stop:
        provider_.stop();
        throw StopSignal{};
      case NodeKind::External:
        values_[id] = provider_.external(n.ext_invoke, n.ext_node);
        break;
      case NodeKind::Else:
      case NodeKind::End:
      case NodeKind::Iter:
      case NodeKind::Cond:
        TORCH_CHECK(false, "control node reached exec");
    }
  } catch (const EvalError&) {
    throw;
  } catch (const ValueNeverProvided& e) {
    fail(id, std::string("the value will never be provided: ") + e.what());
  } catch (const c10::Error& e) {
    fail(id, e.what_without_backtrace());
  } catch (const std::exception& e) {
    fail(id, e.what());
  }
  if (n.has_value()) {
    computed_[id] = 1;
    if (!grads_.empty() && n.kind != NodeKind::Grad) grads_[id] = Value();  // a new value: its old gradient is gone
  }
}

EvalStatus evaluate(const ValidatedGraph& graph, Provider& provider, const EvalOptions& options) {
  Evaluator ev(graph, provider, options);
  return ev.run();
}

}  // namespace nnsight::dsl
