// Mediator: one intervention graph running as a Boost.Context fiber next to
// the model. The graph's evaluator calls this mediator (its Provider) for
// every value; a Get or Set suspends the fiber until the interleaver reaches
// that point of the model and resumes it with the value (or after applying
// the write). Saves are cloned when made, so later in-place kernels cannot
// change them.
//
// Exceptions never cross the fiber boundary: an error inside the graph is
// kept as a message (with the user's file and line) and the mediator ends.
// Destroying a suspended mediator unwinds its fiber (forced_unwind).
#pragma once

#include <boost/context/fiber.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nnsight/request_output.hpp>

#include "core/memory_budget.h"
#include "dsl/evaluate.h"
#include "dsl/validate.h"
#include "front/trace_worker/fiber_sanitizer.h"
#include "front/trace_worker/module_caller.h"
#include "front/trace_worker/trace_payload.h"

namespace nnsight::tracing {

class TraceGroup;

class Mediator final : public dsl::Provider {
 public:
  enum class State { kNotStarted, kWaiting, kDone, kFailed };
  enum class WaitKind { kGet, kSet };

  Mediator(TraceGroup& group, uint64_t request_id, uint32_t invoke, GraphRole role, dsl::ValidatedGraph graph,
           const dsl::FunctionRegistry* functions);
  ~Mediator() override;
  Mediator(const Mediator&) = delete;
  Mediator& operator=(const Mediator&) = delete;

  // Runs the graph until its first wait (or its end).
  void start();
  // Resumes a Get wait with its value.
  void resume_with(dsl::Value value);
  // Resumes a Set wait once the write was applied.
  void resume_after_set();
  // Resumes the current wait by raising `error` there (reported at that node).
  void resume_with_error(const std::string& error);
  // The request ended: the current wait raises RequestFinished (an iteration
  // over all steps ends quietly; anything else is an error).
  void resume_finished();

  State state() const { return state_; }
  bool waiting() const { return state_ == State::kWaiting; }
  const ProviderKey& wait_key() const { return *wait_key_; }  // while waiting
  int64_t wait_step() const { return wait_step_; }
  WaitKind wait_kind() const { return wait_kind_; }
  const dsl::Value& set_value() const { return set_value_; }

  // The request it finishes with; 0 when it spans several (an invoke without
  // a prompt, or one with several prompts): it ends with the last of `requests`.
  uint64_t request_id() const { return request_id_; }
  void set_requests(std::vector<uint64_t> ids);
  // The requests whose rows it sees, in prompt order (set when its trace starts).
  const std::vector<uint64_t>& requests() const { return requests_; }
  uint32_t invoke() const { return invoke_; }
  GraphRole role() const { return role_; }
  const std::string& error() const { return error_; }
  bool stop_requested() const { return stop_requested_; }
  std::map<std::string, SavedValue>& saves() { return saves_; }
  const dsl::Evaluator& evaluator() const { return *evaluator_; }
  const dsl::Graph& graph() const { return graph_.graph(); }
  // Its graph only reads the forward's values (dsl::leaves_forward_alone):
  // its module reads may be served after the forward, from copies.
  bool leaves_forward_alone() const { return leaves_forward_alone_; }

  // Module provider keys the graph reads or writes (where hooks are needed).
  std::set<ProviderKey> module_keys;
  // Keys whose values a grad() names: in a gradient step each read of them is
  // written back (the model goes on with the very tensor the graph holds).
  std::set<ProviderKey> grad_keys;
  // The tensors handed out for grad_keys (backward() accepts only those).
  void note_grad_value(const dsl::Value& v);
  // A new step: the last step's values are no longer backward()'s to reach.
  void clear_grad_values() { grad_values_.clear(); }

  // ---- dsl::Provider (called from inside the fiber)
  dsl::Value get(const ProviderKey& key, int64_t step) override;
  void set(const ProviderKey& key, int64_t step, dsl::Value value) override;
  void save(const std::string& name, const dsl::Value& value, dsl::SaveMode mode) override;
  dsl::Value external(uint32_t invoke, dsl::NodeId node) override;
  void stop() override { stop_requested_ = true; }
  dsl::Value call(const std::string& module, const dsl::Value& arg) override;
  std::vector<at::Tensor> backward(const at::Tensor& metric, const std::vector<at::Tensor>& inputs) override;

  // Runs `call` nodes (null: they fail).
  void set_caller(const ModuleCaller* caller) { module_caller_ = caller; }

  // The memory its graph's ops may hold at once (null: unbounded). Checked
  // before each allocation while its fiber runs (core/memory_budget.h).
  void set_memory_budget(std::shared_ptr<MemoryBudget> budget) { budget_ = std::move(budget); }

 private:
  std::shared_ptr<MemoryBudget> budget_;
  const ModuleCaller* module_caller_ = nullptr;
  enum class Resume { kValue, kSetDone, kError, kFinished };
  void suspend();  // back to the interleaver
  void resume();   // into the fiber
  void after_resume_in_fiber();

  TraceGroup& group_;
  uint64_t request_id_;
  std::vector<uint64_t> requests_;
  uint32_t invoke_;
  GraphRole role_;
  dsl::ValidatedGraph graph_;
  bool leaves_forward_alone_ = false;
  std::unique_ptr<dsl::Evaluator> evaluator_;
  FiberSanitizer sanitizer_;      // before fiber_: the fiber's stack allocator points at it
  boost::context::fiber fiber_;   // the mediator's context (valid while suspended)
  boost::context::fiber caller_;  // the interleaver's context (valid while running)
  State state_ = State::kNotStarted;
  const ProviderKey* wait_key_ = nullptr;  // the waiting node's, in graph_
  int64_t wait_step_ = 0;
  WaitKind wait_kind_ = WaitKind::kGet;
  dsl::Value set_value_;
  Resume resume_kind_ = Resume::kValue;
  dsl::Value resume_value_;
  std::string resume_error_;
  std::string error_;
  bool stop_requested_ = false;
  std::map<std::string, SavedValue> saves_;
  // save_each's slots in the order first made, keyed by the address of the
  // save node's name (the graph's own string, stable while this lives). A
  // graph saving in a loop saves in the same order every step, so the slot
  // is nearly always the one after the last: no walk down saves_' tree, whose
  // nodes the model's forward has evicted from the cache by the next save
  // (84 % of save()'s own samples were that walk, 30 saves per step).
  SavedValue& list_slot(const std::string& name);
  std::vector<std::pair<const std::string*, SavedValue*>> slots_;
  size_t next_slot_ = 0;
  std::vector<at::Tensor> grad_values_;  // handed out for grad_keys this step
};

// A saved value, detached from the model: tensors cloned, numbers as 0-d
// tensors, tuples and lists as lists.
SavedValue to_saved(const dsl::Value& value);

}  // namespace nnsight::tracing
