// Scheduler: decides, each step, which requests compute which tokens.
//
// First come, first served under a per-step token budget and a sequence
// budget. Running requests go first (decodes and the rest of chunked
// prefills), then waiting ones are admitted. Prefill and decode share one
// flat batch. When KV blocks run out, the latest-arrived running request is
// preempted (its blocks freed; it is recomputed later) -- a request waits,
// it is never failed for lack of memory. Requests that share a group id are
// admitted together in one step or not at all.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "runner/scheduler/block_manager.h"
#include "runner/scheduler/request.h"
#include "runner/step/step_data.h"

namespace nnsight::runner {

struct SchedulerConfig {
  int64_t max_num_seqs = 64;              // sequences per step
  int64_t max_num_batched_tokens = 2048;  // tokens per step
  int64_t max_model_len = 8192;           // prompt + output
  bool enable_chunked_prefill = true;     // split prefills longer than the remaining budget
  int64_t num_blocks = 1024;              // KV-cache blocks
  int64_t block_size = 16;                // tokens per block
  bool enable_prefix_caching = true;      // reuse full blocks across requests
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config);

  // Queues a request. Throws ConfigError when it can never be scheduled
  // (too long for the model, or unchunkable and over the token budget).
  void add(RequestPtr request);
  // The checks add() makes, without queuing.
  void check(const Request& request) const;
  // Requests that must be admitted in one step together (a trace's invokes):
  // throws ConfigError naming the limit when they never can be -- more
  // sequences than max_num_seqs, more unchunkable prompt tokens than
  // max_num_batched_tokens, more KV blocks reserved than the cache holds.
  void check_group(const std::vector<const Request*>& group) const;
  // Ends a waiting or running request; its blocks are freed. False if unknown.
  bool abort(uint64_t id);
  // Ends a running request that the engine decided is finished (stop string).
  void finish(uint64_t id, FinishReason reason);

  SchedulerOutput schedule();
  // Waiting requests failed because nothing was running and they still could
  // not be admitted (a safety net behind check_group: the engine never spins
  // on a request that can never run). Their error is set.
  std::vector<RequestPtr> take_unschedulable();
  // Applies a step's results: advances computed counts, appends sampled
  // tokens, caches full blocks, and retires requests the worker finished.
  // Returns the requests that changed, in scheduling order.
  std::vector<RequestPtr> update(const SchedulerOutput& scheduled, const ModelRunnerOutput& output);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty() || !pending_finished_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const BlockManager& blocks() const { return blocks_; }
  const SchedulerConfig& config() const { return config_; }
  RequestPtr get(uint64_t id) const;

 private:
  bool preempt_one(const Request* keep);
  // The head of the queue and the waiting requests of its group, in arrival order.
  std::vector<RequestPtr> waiting_group_of_head() const;
  void retire(const RequestPtr& r);
  std::vector<int32_t> all_tokens(const Request& r) const;

  SchedulerConfig config_;
  BlockManager blocks_;
  std::deque<RequestPtr> waiting_;
  std::vector<RequestPtr> running_;  // in arrival order
  absl::flat_hash_map<uint64_t, RequestPtr> by_id_;
  std::vector<uint64_t> pending_finished_;  // told to workers at the next step
  std::vector<uint64_t> pending_preempted_;
  std::vector<RequestPtr> unschedulable_;
  uint64_t step_ = 0;
  bool last_step_gradients_ = false;  // the last step ran gradient requests
  int64_t num_preemptions_ = 0;
};

}  // namespace nnsight::runner
