#include "front/trace_worker/mediator.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cstring>

#include <nnsight/error.hpp>

#include "core/gradient_forward.h"
#include "dsl/analysis.h"
#include "dsl/errors.h"
#include "front/trace_worker/fiber_stack_pool.h"
#include "front/trace_worker/trace_group.h"

namespace nnsight::tracing {

namespace ctx = boost::context;

namespace {
at::Tensor number_tensor(const dsl::Value& v) {
  switch (v.kind()) {
    case dsl::ValueKind::Int:
      return at::scalar_tensor(v.as_int(), at::kLong);
    case dsl::ValueKind::Double:
      return at::scalar_tensor(v.as_double(), at::kDouble);
    case dsl::ValueKind::Bool:
      return at::scalar_tensor(v.as_bool(), at::kBool);
    default:
      break;
  }
  throw Error("cannot save a value of kind " + v.describe());
}

// A copy sharing nothing with the model's tensor. A dense CPU tensor (what
// saving module outputs every step copies, 30 of them per request per step)
// is copied by memcpy into a fresh tensor: clone()'s operator dispatch and
// TensorIterator set-up cost more than copying its few KiB.
at::Tensor detached(const at::Tensor& t) {
  if (!t.defined()) return at::Tensor();
  if (!t.device().is_cpu() || t.layout() != at::kStrided || t.is_quantized() || !t.is_contiguous() || t.is_conj() ||
      t.is_neg())
    return t.detach().clone();
  at::Tensor copy = at::empty(t.sizes(), t.options());  // t's shape, contiguous
  if (const size_t n = t.nbytes(); n > 0) std::memcpy(copy.data_ptr(), t.data_ptr(), n);
  return copy;
}

at::Tensor as_single_tensor(const dsl::Value& v) {
  if (v.is_tensor()) return detached(v.as_tensor());
  if (v.is_none()) return at::Tensor();
  if (v.is_number()) return number_tensor(v);
  throw Error("cannot save " + v.describe() + " as one tensor; save its elements");
}
}  // namespace

SavedValue to_saved(const dsl::Value& v) {
  switch (v.kind()) {
    case dsl::ValueKind::Tuple: {
      std::vector<at::Tensor> items;
      for (const auto& t : v.as_tuple()) items.push_back(detached(t));
      return SavedValue::of_list(std::move(items));
    }
    case dsl::ValueKind::List: {
      std::vector<at::Tensor> items;
      for (const auto& item : v.as_list()) items.push_back(as_single_tensor(item));
      return SavedValue::of_list(std::move(items));
    }
    default:
      return SavedValue(as_single_tensor(v));
  }
}

Mediator::Mediator(TraceGroup& group, uint64_t request_id, uint32_t invoke, GraphRole role, dsl::ValidatedGraph graph,
                   const dsl::FunctionRegistry* functions)
    : group_(group),
      request_id_(request_id),
      invoke_(invoke),
      role_(role),
      graph_(std::move(graph)),
      leaves_forward_alone_(dsl::leaves_forward_alone(graph_.graph())) {
  evaluator_ = std::make_unique<dsl::Evaluator>(graph_, *this, dsl::EvalOptions().with_functions(functions));
}

void Mediator::set_requests(std::vector<uint64_t> ids) {
  if (ids.size() > 1) request_id_ = 0;  // ends with the last of them
  requests_ = std::move(ids);
}

Mediator::~Mediator() {
  // A fiber still suspended is unwound here: boost throws forced_unwind
  // inside it, which the evaluator lets pass, and its stack is released.
  if (fiber_) {
    sanitizer_.enter();
    fiber_ = ctx::fiber();
    sanitizer_.back_in_caller();
  }
}

void Mediator::start() {
  TORCH_CHECK(state_ == State::kNotStarted, "Mediator::start called twice");
  state_ = State::kWaiting;  // running; set properly below
  fiber_ = ctx::fiber(std::allocator_arg, PooledProtectedStack(FiberStackPool::instance(), &sanitizer_),
                      [this](ctx::fiber&& caller) {
                        sanitizer_.landed_in_fiber();
                        caller_ = std::move(caller);
                        try {
                          evaluator_->run();
                          state_ = State::kDone;
                        } catch (const std::exception& e) {
                          // forced_unwind is not a std::exception: it passes.
                          error_ = e.what();
                          state_ = State::kFailed;
                        } catch (const ctx::detail::forced_unwind&) {
                          sanitizer_.leave(/*ending=*/true);  // boost jumps back to the destructor
                          throw;
                        }
                        sanitizer_.leave(/*ending=*/true);
                        return std::move(caller_);
                      });
  resume();
}

void Mediator::resume() {
  ScopedMemoryBudget budget(budget_);  // the graph's allocations count against its request
  sanitizer_.enter();
  fiber_ = std::move(fiber_).resume();
  sanitizer_.back_in_caller();
}

void Mediator::suspend() {
  state_ = State::kWaiting;
  sanitizer_.leave(/*ending=*/false);
  try {
    caller_ = std::move(caller_).resume();
  } catch (const ctx::detail::forced_unwind&) {
    sanitizer_.landed_in_fiber();  // the destructor's switch into the fiber, which unwinds now
    throw;
  }
  sanitizer_.landed_in_fiber();
  after_resume_in_fiber();
}

void Mediator::after_resume_in_fiber() {
  switch (resume_kind_) {
    case Resume::kValue:
    case Resume::kSetDone:
      return;
    case Resume::kError:
      throw Error(resume_error_);
    case Resume::kFinished:
      throw dsl::RequestFinished();
  }
}

void Mediator::resume_with(dsl::Value value) {
  TORCH_CHECK(waiting() && wait_kind_ == WaitKind::kGet, "Mediator: not waiting for a value");
  resume_kind_ = Resume::kValue;
  resume_value_ = std::move(value);
  resume();
}

void Mediator::resume_after_set() {
  TORCH_CHECK(waiting() && wait_kind_ == WaitKind::kSet, "Mediator: not waiting on a write");
  resume_kind_ = Resume::kSetDone;
  set_value_ = dsl::Value();
  resume();
}

void Mediator::resume_with_error(const std::string& error) {
  TORCH_CHECK(waiting(), "Mediator: not waiting");
  resume_kind_ = Resume::kError;
  resume_error_ = error;
  resume();
}

void Mediator::resume_finished() {
  TORCH_CHECK(waiting(), "Mediator: not waiting");
  resume_kind_ = Resume::kFinished;
  resume();
}

dsl::Value Mediator::call(const std::string& module, const dsl::Value& arg) {
  if (!module_caller_) throw Error("module '" + module + "' cannot be called: no model runs here");
  return dsl::Value(module_caller_->call_module(module, arg.as_tensor()));
}

void Mediator::note_grad_value(const dsl::Value& v) {
  if (v.is_tensor()) grad_values_.push_back(v.as_tensor());
  if (v.kind() == dsl::ValueKind::Tuple)
    for (const auto& t : v.as_tuple())
      if (t.defined()) grad_values_.push_back(t);
}

std::vector<at::Tensor> Mediator::backward(const at::Tensor& metric, const std::vector<at::Tensor>& inputs) {
  if (!GradientForward::active())
    throw Error("backward() runs only in a step of a request admitted for gradients (this one was not)");
  if (!metric.requires_grad())
    throw Error("backward(): the metric does not depend on any value of the model's forward in this step");
  for (const at::Tensor& x : inputs) {
    const bool handed = std::any_of(grad_values_.begin(), grad_values_.end(), [&](const at::Tensor& h) {
      return h.unsafeGetTensorImpl() == x.unsafeGetTensorImpl();
    });
    if (!handed)
      throw Error(
          "backward(): a grad() names a value that is not the model's value as read in this step (grad() of "
          "a module output that is a tensor, not a tuple, must not index it first; read the gradient, then "
          "index it)");
  }
  // Every graph of the step stays for later backward() calls (retain_graph):
  // NNsight lets a trace call backward more than once.
  std::vector<at::Tensor> reached;
  for (const at::Tensor& x : inputs)
    if (x.requires_grad()) reached.push_back(x);
  std::vector<at::Tensor> grads;
  if (!reached.empty())
    grads = torch::autograd::grad({metric.reshape({})}, reached, /*grad_outputs=*/{}, /*retain_graph=*/true,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  // Zeros where the metric does not depend on a value (PyTorch's None).
  std::vector<at::Tensor> out;
  size_t k = 0;
  for (const at::Tensor& x : inputs) {
    at::Tensor g = x.requires_grad() ? grads[k++] : at::Tensor();
    out.push_back(g.defined() ? g.detach() : at::zeros_like(x));
  }
  return out;
}

dsl::Value Mediator::get(const ProviderKey& key, int64_t step) {
  wait_kind_ = WaitKind::kGet;
  wait_key_ = &key;
  wait_step_ = step;
  suspend();
  return std::move(resume_value_);
}

void Mediator::set(const ProviderKey& key, int64_t step, dsl::Value value) {
  wait_kind_ = WaitKind::kSet;
  wait_key_ = &key;
  wait_step_ = step;
  set_value_ = std::move(value);
  suspend();
}

namespace {
int64_t tensor_bytes(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

int64_t saved_bytes(const SavedValue& v) {
  int64_t n = tensor_bytes(v.tensor);
  for (const auto& t : v.list) n += tensor_bytes(t);
  return n;
}
}  // namespace

void Mediator::save(const std::string& name, const dsl::Value& value, dsl::SaveMode mode) {
  // Counted against the trace's saved bytes limit as it is made (the clone
  // has the value's size), so a trace that saves too much fails at the step
  // that crosses the limit and never holds more.
  if (mode == dsl::SaveMode::Replace) {
    SavedValue made = to_saved(value);
    auto it = saves_.find(name);
    group_.count_saved(saved_bytes(made) - (it == saves_.end() ? 0 : saved_bytes(it->second)), name);
    saves_[name] = std::move(made);
    return;
  }
  at::Tensor made = as_single_tensor(value);
  group_.count_saved(tensor_bytes(made), name);
  SavedValue& slot = list_slot(name);
  slot.is_list = true;
  slot.list.push_back(std::move(made));
}

SavedValue& Mediator::list_slot(const std::string& name) {
  if (next_slot_ < slots_.size() && slots_[next_slot_].first == &name) return *slots_[next_slot_++].second;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].first == &name) {
      next_slot_ = i + 1;
      return *slots_[i].second;
    }
  SavedValue& slot = saves_[name];
  slots_.emplace_back(&name, &slot);
  next_slot_ = slots_.size();
  return slot;
}

dsl::Value Mediator::external(uint32_t invoke, dsl::NodeId node) { return group_.external(invoke, node); }

}  // namespace nnsight::tracing
