// Interleaver: runs the mediators of every traced request against the
// model's phases on one worker (a runner::StepObserver).
//
//   admission  decode + validate each request's graphs, check them against
//              the model's structure, start the fibers (they run to their
//              first wait) once the whole trace has arrived
//   forward    hooks sit only on the modules some live mediator's graph
//              touches; at each one, the trace groups' mediators resume in
//              invoke order, each seeing only its own rows of the flat
//              batch (token rows [start, n]); writes go to a copy of the
//              value and only into the writer's rows
//   logits / samples   prompt-level rows: one row per request that samples
//   finish     "result" (the generated token ids), then the request's
//              remaining waits end (an iteration over all steps quietly);
//              saves go back with the request's output
//
// Tensor parallelism: every rank runs the same mediators. A value a module
// holds split across ranks (Module::output_sharding / input_sharding) is
// gathered whole before the first mediator at that event sees it -- only
// then, so untouched values cost nothing -- and re-sharded for the model
// after the last one (docs/tensor_parallel.md).
//
// An error in a mediator ends its whole trace (every request of it) with the
// message naming the user's file and line; other requests are untouched.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/hook_point.h"
#include "core/module.h"
#include "models/attached/attached_module.h"
#include "batching/batch_groups.h"
#include "dsl/function_registry.h"
#include "dsl/limits.h"
#include "front/trace_worker/admission.h"
#include "front/trace_worker/trace_group.h"
#include "runner/model_runner/model_runner.h"
#include "runner/model_runner/step_observer.h"

namespace nnsight::tracing {

struct InterleaverOptions {
  dsl::Limits limits;                                // sizes a payload may have
  const dsl::FunctionRegistry* functions = nullptr;  // what `apply` nodes may call
  int64_t memory_budget_bytes = 0;                   // per request's intervention; 0 = unbounded
  int world_size = 1;                                // tensor-parallel ranks (gradients need 1)
};

class Interleaver final : public runner::StepObserver, public ModuleCaller {
 public:
  Interleaver(runner::ModelRunner& runner, const InterleaverOptions& options);
  ~Interleaver() override;

  void on_new_request(const runner::NewRequest& request) override;
  void before_forward(const runner::StepContext& ctx) override;
  // Its hooks, when every live trace leaves the forward alone (reads only)
  // and every hooked value is a row-per-token (or per-prompt) module value:
  // no skip, no attached module spliced in, no per-sequence or routed point.
  size_t deferrable_hooks(const runner::StepContext& ctx) const override;
  void on_logits(const runner::StepContext& ctx, at::Tensor& logits) override;
  void on_samples(const runner::StepContext& ctx, at::Tensor& tokens) override;
  void on_finished(uint64_t id, runner::FinishedRequest& out) override;
  std::vector<std::pair<uint64_t, std::string>> take_errors() override;
  std::vector<uint64_t> take_stopped() override;

  // ModuleCaller: a graph's `call` of one of the model's modules.
  at::Tensor call_module(const std::string& path, const at::Tensor& x) const override;

  // Live trace groups and installed hooks (for tests and benchmarks).
  size_t num_groups() const { return groups_.size(); }
  size_t num_hooks() const { return hooks_.size(); }

 private:
  // A provider value at one event, as the model holds it: a tensor or a
  // tuple (module outputs), with copy-on-write for writes.
  struct EventValue {
    ModuleIO io;                                            // what the model will continue with
    std::vector<bool> cloned;                               // element already copied for writing
    batching::RowLevel level = batching::RowLevel::kToken;  // what dim 0 indexes
    // Tensor parallelism: how element 0 is split across ranks (null: whole
    // on every rank). Gathered before the first mediator sees it, re-sharded
    // for the model afterwards.
    const TensorSharding* sharding = nullptr;
    bool gathered = false;
    // Routed level: the token row of each row (the module's row_tokens).
    const at::Tensor* row_tokens = nullptr;
    Module* module = nullptr;  // the module whose event this is (skips)
    // Sequence level: the first token row of the sequence whose value this is.
    int64_t sequence_start = -1;
  };
  // The hooks of one module key: before the module runs (.input, .inputs),
  // after (.output), or both (.skip: the values are set before, applied after).
  struct InstalledHook {
    HookHandle before;
    HookHandle after;
    void remove() {
      before.remove();
      after.remove();
    }
  };
  // A skip set for some rows of a module's current call (envoy.skip).
  struct PendingSkip {
    TraceGroup* group = nullptr;
    uint32_t invoke = 0;
    batching::RowRanges rows;
    at::Tensor value;
  };

  void start_group(TraceGroup& group);
  void sync_hooks();
  // Splices each attached module at its hook point while some waiting key is
  // one of its paths (and only then: a step no trace of which touches it runs
  // nothing of it). A splice is registered after the host's own trace hooks
  // (re-registered when one is added), so a trace sees the host's output
  // before the attached module runs on it, as the probe's event order says.
  void sync_splices(const std::set<ProviderKey>& wanted, const std::set<Module*>& newly_hooked);
  // Whether a live trace of the request whose token rows start at
  // `token_start` in this step touches a key of the module at `path`: the
  // question a HookPoint asks before computing a value only traces need.
  bool watches(const std::string& path, int64_t token_start) const;
  void dispatch(const ProviderKey& key, EventValue& ev);
  // Before the module runs: when skips cover every row, its body is skipped.
  void skip_whole_call(Module& m, const ModuleIO& in);
  // After it ran (or was skipped): the skipped rows take their values.
  std::optional<ModuleIO> apply_skips(Module& m, const ModuleIO& out);
  // Makes element 0 whole (a collective: every rank gets here alike, since
  // every rank runs the same mediators over the same batch).
  static void gather(EventValue& ev);
  // The value the model continues with after dispatch, or nullopt to keep its own.
  static std::optional<ModuleIO> result_of(EventValue& ev);
  // The rows of this step that mediator m sees at `level` for generation step `step`.
  // False when none of its requests is at that step in this step's batch. At
  // routed level a request in the step may own no rows (an expert none of its
  // tokens went to): true, with no rows, as the module ran for it.
  bool rows_for(const Mediator& m, TraceGroup& g, const EventValue& ev, int64_t step, batching::RowRanges& rows) const;
  // Whether the key's value is the module's whole tuple (".inputs", or ".output" of a tuple).
  static bool whole_tuple(const ProviderKey& key, const EventValue& ev);
  dsl::Value read(EventValue& ev, const ProviderKey& key, const batching::RowRanges& rows) const;
  void write(EventValue& ev, const ProviderKey& key, const batching::RowRanges& rows, const dsl::Value& value);
  const batching::BatchGroup* in_step(uint64_t request_id) const;
  // Token ids written to `samples` must be in the vocabulary (the engine feeds them back).
  void check_token_ids(const at::Tensor& ids) const;
  void after_resume(Mediator& m, TraceGroup& g);
  void fail_group(TraceGroup& g, const std::string& message);
  void check_missed(const runner::StepContext& ctx);
  void finish_request(TraceGroup& g, uint64_t id, runner::FinishedRequest& out);
  TraceGroup* group_of(uint64_t request_id) const;

  runner::ModelRunner& runner_;
  AdmissionContext admission_;
  int64_t vocab_size_;
  absl::flat_hash_map<std::string, Module*> modules_;             // path -> module
  std::map<uint64_t, std::unique_ptr<TraceGroup>> groups_;        // by trace id
  absl::flat_hash_map<uint64_t, uint64_t> trace_of_;              // request id -> trace id
  absl::flat_hash_map<ProviderKey, InstalledHook> hooks_;         // (module, kind) -> its hooks
  std::vector<AttachedModule*> attached_;                         // the model's attached modules
  absl::flat_hash_map<AttachedModule*, HookHandle> splices_;      // installed now
  absl::flat_hash_map<Module*, std::vector<PendingSkip>> skips_;  // set this call, not yet applied
  const batching::BatchGroups* step_ = nullptr;                   // this step's rows (valid during the step)
  std::vector<std::pair<uint64_t, std::string>> errors_;
  std::set<uint64_t> stopped_;
};

}  // namespace nnsight::tracing
