// TraceGroup: one trace's mediators on a worker -- one per invoke (plus any
// auxiliary graphs), kept in invoke order, which is the order they resume in
// at every provider -- and the trace's requests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsl/value.h"
#include "front/trace_worker/mediator.h"

namespace nnsight::tracing {

class TraceGroup {
 public:
  TraceGroup(uint64_t trace_id, uint32_t num_requests, uint32_t num_invokes)
      : trace_id_(trace_id), num_requests_(num_requests), num_invokes_(num_invokes) {}

  uint64_t trace_id() const { return trace_id_; }
  uint32_t num_requests() const { return num_requests_; }
  uint32_t num_invokes() const { return num_invokes_; }

  // Adds a mediator, keeping invoke order (then role order) stable.
  Mediator& add(std::unique_ptr<Mediator> m);
  std::vector<std::unique_ptr<Mediator>>& mediators() { return mediators_; }
  void remove_mediators_of(uint64_t request_id);

  std::vector<uint64_t>& requests() { return requests_; }  // admitted, in invoke order
  // Admits request `id` of invoke `invoke` (SamplingParams::invoke_index);
  // `has_graphs`: it carries graphs (an invoke's first prompt) or none (a
  // further prompt of an invoke with several).
  void add_request(uint64_t id, uint32_t invoke, bool has_graphs) {
    requests_.push_back(id);
    invoke_of_.push_back(invoke);
    has_graphs_.push_back(has_graphs);
  }
  // The requests whose rows mediator `m` sees, in prompt order: every request
  // of the trace for an invoke without a prompt; else its own request, then
  // the requests without graphs of the same invoke.
  std::vector<uint64_t> requests_of(const Mediator& m) const;
  std::vector<uint64_t>& finished() { return finished_; }                   // requests already finished
  std::map<uint64_t, std::vector<int64_t>>& results() { return results_; }  // tokens per request
  bool complete() const { return requests_.size() == num_requests_; }
  bool started = false;
  bool failed = false;

  // The bytes the trace's saves hold on this worker, bounded by
  // SamplingParams::max_saved_bytes (0 = unbounded). Counts `delta` more (a
  // save made; negative: one replaced), or throws nnsight::Error naming the
  // limit and `name` -- the save fails its trace at the step it is made.
  void count_saved(int64_t delta, const std::string& name);
  int64_t saved_bytes() const { return saved_bytes_; }
  int64_t max_saved_bytes = 0;

  // The value `node` of invoke `invoke`'s graph computed (cross-invoke use).
  dsl::Value external(uint32_t invoke, dsl::NodeId node) const;

 private:
  uint64_t trace_id_;
  uint32_t num_requests_, num_invokes_;
  std::vector<std::unique_ptr<Mediator>> mediators_;
  std::vector<uint64_t> requests_;
  std::vector<uint32_t> invoke_of_;  // invoke of requests_[i]
  std::vector<bool> has_graphs_;     // requests_[i] carries graphs
  std::vector<uint64_t> finished_;
  std::map<uint64_t, std::vector<int64_t>> results_;
  int64_t saved_bytes_ = 0;
};

}  // namespace nnsight::tracing
