#include "runner/scheduler/scheduler.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include <nnsight/error.hpp>

namespace nnsight::runner {

Scheduler::Scheduler(SchedulerConfig config)
    : config_(config), blocks_(config.num_blocks, config.block_size, config.enable_prefix_caching) {}

RequestPtr Scheduler::get(uint64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

void Scheduler::add(RequestPtr r) {
  check(*r);
  r->status = RequestStatus::kWaiting;
  by_id_[r->id] = r;
  waiting_.push_back(std::move(r));
}

void Scheduler::check(const Request& req) const {
  const Request* r = &req;
  const int64_t len = r->num_tokens();
  if (len == 0) throw ConfigError("request " + std::to_string(r->id) + ": the prompt is empty");
  if (len >= config_.max_model_len) {
    throw ConfigError("request " + std::to_string(r->id) + ": prompt of " + std::to_string(len) +
                      " tokens leaves no room to generate within max_model_len " +
                      std::to_string(config_.max_model_len));
  }
  const bool chunkable = config_.enable_chunked_prefill && r->params.allow_chunking();
  if (!chunkable && len > config_.max_num_batched_tokens) {
    throw ConfigError("request " + std::to_string(r->id) + ": prompt of " + std::to_string(len) +
                      " tokens exceeds max_num_batched_tokens " + std::to_string(config_.max_num_batched_tokens) +
                      " and chunked prefill is off for it");
  }
  if (blocks_.blocks_for(std::min(len + r->params.max_tokens(), config_.max_model_len)) > blocks_.num_blocks()) {
    throw ConfigError("request " + std::to_string(r->id) + ": needs more KV-cache blocks than the engine has (" +
                      std::to_string(blocks_.num_blocks()) + " of " + std::to_string(config_.block_size) +
                      " tokens); raise kv_cache_memory_mb or lower max_tokens");
  }
}

void Scheduler::check_group(const std::vector<const Request*>& group) const {
  if (group.size() < 2) return;
  const std::string what = "the " + std::to_string(group.size()) + " requests of group '" +
                           group.front()->params.group_id() + "' (a trace's invokes, admitted in one step together)";
  if (static_cast<int64_t>(group.size()) > config_.max_num_seqs) {
    throw ConfigError(what + " can never be scheduled: they need " + std::to_string(group.size()) +
                      " sequences in one step and max_num_seqs is " + std::to_string(config_.max_num_seqs) +
                      " (raise max_num_seqs, or use fewer invokes)");
  }
  bool chunkable = config_.enable_chunked_prefill;
  int64_t tokens = 0, blocks = 0;
  for (const Request* r : group) {
    chunkable = chunkable && r->params.allow_chunking();
    tokens += r->num_tokens();
    // Requests carrying an intervention reserve their whole generation at admission.
    const int64_t reserve =
        r->has_payload() ? std::min(r->num_tokens() + r->params.max_tokens(), config_.max_model_len) : r->num_tokens();
    blocks += blocks_.blocks_for(reserve);
  }
  if (!chunkable && tokens > config_.max_num_batched_tokens) {
    throw ConfigError(what + " can never be scheduled: their prompts total " + std::to_string(tokens) +
                      " tokens, computed in one step without chunking, and max_num_batched_tokens is " +
                      std::to_string(config_.max_num_batched_tokens));
  }
  if (blocks > blocks_.num_blocks()) {
    throw ConfigError(what + " can never be scheduled: they reserve " + std::to_string(blocks) +
                      " KV-cache blocks of " + std::to_string(config_.block_size) +
                      " tokens (prompt + max_tokens each) and the cache holds " + std::to_string(blocks_.num_blocks()) +
                      " (raise kv_cache_memory_mb or lower max_tokens)");
  }
}

std::vector<RequestPtr> Scheduler::waiting_group_of_head() const {
  const RequestPtr& head = waiting_.front();
  std::vector<RequestPtr> group{head};
  if (!head->params.group_id().empty())
    for (size_t k = 1; k < waiting_.size(); ++k)
      if (waiting_[k]->params.group_id() == head->params.group_id()) group.push_back(waiting_[k]);
  return group;
}

std::vector<RequestPtr> Scheduler::take_unschedulable() {
  std::vector<RequestPtr> out;
  out.swap(unschedulable_);
  return out;
}

std::vector<int32_t> Scheduler::all_tokens(const Request& r) const {
  std::vector<int32_t> t;
  t.reserve(static_cast<size_t>(r.num_tokens()));
  t.insert(t.end(), r.prompt_token_ids.begin(), r.prompt_token_ids.end());
  t.insert(t.end(), r.output_token_ids.begin(), r.output_token_ids.end());
  return t;
}

bool Scheduler::preempt_one(const Request* keep) {
  // The latest arrival that is not `keep` (running_ is in arrival order).
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (it->get() == keep) continue;
    // A request carrying an intervention is never preempted: recomputing it
    // would replay (or lose) what its intervention did to earlier steps.
    if ((*it)->has_payload()) continue;
    RequestPtr victim = *it;
    running_.erase(std::next(it).base());
    blocks_.free(victim->blocks);
    victim->num_computed = 0;
    victim->status = RequestStatus::kWaiting;
    victim->preempted = true;
    ++victim->num_preemptions;
    ++num_preemptions_;
    if (victim->sent_to_workers) pending_preempted_.push_back(victim->id);
    // Back to the head of the queue, keeping arrival order among preempted ones.
    auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                            [&](const RequestPtr& w) { return w->arrival > victim->arrival; });
    waiting_.insert(pos, victim);
    return true;
  }
  return false;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.step = step_++;
  out.finished_ids.swap(pending_finished_);
  int64_t budget = config_.max_num_batched_tokens;
  bool preempted_now = false;

  auto emit = [&](Request& r, int64_t n) {
    batching::SeqSlot s;
    s.id = r.id;
    s.num_computed = r.num_computed;
    s.token_ids.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) s.token_ids.push_back(r.token_at(r.num_computed + i));
    s.block_table = r.blocks.blocks;
    s.sample = r.num_computed + n == r.num_tokens();
    s.num_generated = static_cast<int64_t>(r.output_token_ids.size());
    s.recompute = r.preempted;
    out.scheduled.push_back(std::move(s));
  };

  // Requests that asked for gradients never share a step with others: their
  // forward records an autograd graph and their backward would run over every
  // row of the step. One gradient group runs at a time; while both kinds have
  // work, the steps alternate.
  auto grads = [](const RequestPtr& r) { return r->params.gradients(); };
  const bool grad_running = std::any_of(running_.begin(), running_.end(), grads);
  const bool plain_running = !std::all_of(running_.begin(), running_.end(), grads);
  const bool grad_head = !waiting_.empty() && grads(waiting_.front());
  const bool grad_work = grad_running || grad_head;
  const bool plain_work = plain_running || (!waiting_.empty() && !grad_head);
  const bool grad_step = grad_work && (!plain_work || !last_step_gradients_);
  last_step_gradients_ = grad_step;

  // 1) Running requests of this step's kind, in arrival order.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    RequestPtr r = running_[i];
    if (grads(r) != grad_step) {
      ++i;
      continue;
    }
    const int64_t remaining = r->num_tokens() - r->num_computed;
    const int64_t n = std::min(remaining, budget);
    TORCH_CHECK(n > 0, "Scheduler: running request ", r->id, " has nothing to compute");
    bool self_preempted = false;
    while (!blocks_.allocate(r->blocks, r->num_computed + n)) {
      preempted_now = true;
      if (!preempt_one(r.get())) {
        preempt_one(nullptr);  // r is the only one left: it waits for blocks itself
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    emit(*r, n);
    budget -= n;
    ++i;
  }

  // 2) Waiting requests, first come first served, whole groups at a time.
  while (!preempted_now && !waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    // FCFS across kinds: a head of the other kind waits for its own step (a
    // gradient group also for the running one to end).
    if (grads(waiting_.front()) != grad_step || (grad_step && grad_running)) break;
    std::vector<RequestPtr> group = waiting_group_of_head();
    if (static_cast<int64_t>(running_.size() + group.size()) > config_.max_num_seqs) break;

    bool group_chunkable = config_.enable_chunked_prefill;
    for (const auto& g : group) group_chunkable = group_chunkable && g->params.allow_chunking();

    int64_t left = budget;
    std::vector<int64_t> counts;
    bool ok = true;
    for (const auto& g : group) {
      int64_t cached = 0;
      if (g->params.prefix_caching())
        cached = blocks_.acquire_cached_prefix(all_tokens(*g), g->params.cache_salt(), g->blocks);
      g->num_computed = cached;
      int64_t n = g->num_tokens() - cached;
      if (n > left) {
        if (!group_chunkable || left == 0) {
          ok = false;
          break;
        }
        n = left;
      }
      // Requests carrying an intervention reserve their whole generation now,
      // so they never need blocks later (they are never preempted).
      const int64_t reserve =
          g->has_payload() ? std::min(g->num_tokens() + g->params.max_tokens(), config_.max_model_len) : cached + n;
      if (!blocks_.allocate(g->blocks, reserve)) {
        ok = false;
        break;
      }
      left -= n;
      counts.push_back(n);
    }
    if (!ok) {
      for (const auto& g : group) {
        blocks_.free(g->blocks);
        g->num_computed = 0;
      }
      break;
    }
    budget = left;
    for (size_t k = 0; k < group.size(); ++k) {
      RequestPtr g = group[k];
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), g));
      g->status = RequestStatus::kRunning;
      auto pos =
          std::find_if(running_.begin(), running_.end(), [&](const RequestPtr& x) { return x->arrival > g->arrival; });
      running_.insert(pos, g);
      if (!g->sent_to_workers) {
        out.new_requests.push_back(NewRequest{g->id, g->params, g->prompt_token_ids, g->seed});
        g->sent_to_workers = true;
      }
      emit(*g, counts[k]);
    }
    if (grad_step) break;  // one gradient group per step
  }
  // Nothing runs and the head of the queue still cannot be admitted: it never
  // will be (check_group should have refused it). Fail its group rather than spin.
  if (out.scheduled.empty() && running_.empty() && !waiting_.empty() && !preempted_now) {
    std::vector<RequestPtr> group = waiting_group_of_head();
    for (const auto& g : group) {
      retire(g);
      g->status = RequestStatus::kFinished;
      g->finish_reason = FinishReason::kError;
      g->error = "request " + std::to_string(g->id) +
                 " can never be scheduled with this engine's limits (max_num_seqs " +
                 std::to_string(config_.max_num_seqs) + ", max_num_batched_tokens " +
                 std::to_string(config_.max_num_batched_tokens) + ", " + std::to_string(blocks_.num_blocks()) +
                 " KV-cache blocks)";
      by_id_.erase(g->id);
      unschedulable_.push_back(g);
    }
  }
  out.preempted_ids.swap(pending_preempted_);
  return out;
}

void Scheduler::retire(const RequestPtr& r) {
  auto it = std::find(running_.begin(), running_.end(), r);
  if (it != running_.end()) running_.erase(it);
  auto wt = std::find(waiting_.begin(), waiting_.end(), r);
  if (wt != waiting_.end()) waiting_.erase(wt);
  blocks_.free(r->blocks);
}

bool Scheduler::abort(uint64_t id) {
  RequestPtr r = get(id);
  if (!r || r->status == RequestStatus::kFinished || r->status == RequestStatus::kFinishing) return false;
  finish(id, FinishReason::kAbort);
  return true;
}

void Scheduler::finish(uint64_t id, FinishReason reason) {
  RequestPtr r = get(id);
  if (!r || r->status == RequestStatus::kFinished || r->status == RequestStatus::kFinishing) return;
  retire(r);
  r->finish_reason = reason;
  if (r->sent_to_workers) {
    // Workers finish it (and return its saves) at the next step.
    r->status = RequestStatus::kFinishing;
    pending_finished_.push_back(id);
  } else {
    r->status = RequestStatus::kFinished;
    by_id_.erase(id);
  }
}

std::vector<RequestPtr> Scheduler::update(const SchedulerOutput& scheduled, const ModelRunnerOutput& output) {
  std::vector<RequestPtr> changed;
  for (const auto& s : scheduled.scheduled) {
    RequestPtr r = get(s.id);
    if (!r || r->status != RequestStatus::kRunning) continue;
    r->num_computed += static_cast<int64_t>(s.token_ids.size());
    if (s.sample) r->preempted = false;
    changed.push_back(r);
  }
  for (const auto& t : output.sampled) {
    RequestPtr r = get(t.id);
    if (!r || r->status != RequestStatus::kRunning) continue;
    r->output_token_ids.push_back(t.token);
    if (t.has_logprobs) r->logprobs.push_back(t.logprobs);
  }
  if (blocks_.prefix_caching()) {
    for (const auto& r : changed)
      if (r->status == RequestStatus::kRunning && r->params.prefix_caching())
        blocks_.cache_full_blocks(all_tokens(*r), r->params.cache_salt(), r->blocks, r->num_computed);
  }
  for (const auto& f : output.finished) {
    RequestPtr r = get(f.id);
    if (!r) continue;
    if (r->status == RequestStatus::kRunning || r->status == RequestStatus::kWaiting) {
      retire(r);
      r->finish_reason = f.reason;
      if (std::find(changed.begin(), changed.end(), r) == changed.end()) changed.push_back(r);
    }
    if (!f.error.empty()) {
      r->error = f.error;
      r->finish_reason = FinishReason::kError;
    }
    for (const auto& [name, value] : f.saves) r->saves[name] = value;
    r->status = RequestStatus::kFinished;
    by_id_.erase(f.id);
    if (std::find(changed.begin(), changed.end(), r) == changed.end()) changed.push_back(r);
  }
  return changed;
}

}  // namespace nnsight::runner
