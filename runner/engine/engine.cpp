#include "runner/engine/engine.h"

#include <algorithm>
#include <map>

#include <nnsight/error.hpp>

#include "core/log.h"
#include "core/model_path.h"
#include "core/tokenizer/tokenizer_loader.h"
#include "runner/engine/engine_failure.h"
#include "runner/executor/worker_setup.h"

namespace nnsight::runner {

namespace {
uint64_t mix64(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& model_path) {
  if (!model_has_tokenizer(model_path)) {
    log_info(model_path + " has no tokenizer: the engine takes token ids only");
    return nullptr;
  }
  return std::make_shared<const Tokenizer>(load_tokenizer_for_model(model_path));
}

Engine::Engine(const EngineArgs& args)
    : Engine(args, make_executor(args), load_tokenizer(resolve_model_path(args.model()))) {}

Engine::Engine(const EngineArgs& args, std::unique_ptr<Executor> executor, std::shared_ptr<const Tokenizer> tokenizer)
    : args_(args), executor_(std::move(executor)), tokenizer_(std::move(tokenizer)) {
  args_.validate();
  scheduler_ = std::make_unique<Scheduler>(scheduler_config());
}

SchedulerConfig Engine::scheduler_config() const {
  SchedulerConfig sc;
  sc.max_num_seqs = args_.max_num_seqs();
  sc.max_num_batched_tokens = args_.max_num_batched_tokens();
  sc.max_model_len = max_model_len_for(args_, executor_->model_config());
  sc.enable_chunked_prefill = args_.enable_chunked_prefill();
  sc.enable_prefix_caching = args_.enable_prefix_caching();
  sc.num_blocks = executor_->num_kv_blocks();
  sc.block_size = args_.block_size();
  return sc;
}

Engine::~Engine() {
  if (executor_) executor_->shutdown();
}

RequestPtr Engine::make_request(RequestInput in) {
  if (!broken_.empty()) throw Error("the engine is not serving: " + broken_);
  in.params.validate();
  if (!in.params.stop().empty() && !tokenizer_)
    throw ConfigError("SamplingParams.stop needs a tokenizer, and this engine has none");
  auto r = std::make_shared<Request>();
  if (in.id != 0) {
    if (live_.count(in.id)) throw ConfigError("request id " + std::to_string(in.id) + " is already in use");
    r->id = in.id;
    next_id_ = std::max(next_id_, in.id + 1);
  } else {
    r->id = next_id_++;
  }
  r->prompt = std::move(in.prompt);
  if (in.prompt_token_ids.empty()) {
    if (!tokenizer_) throw ConfigError("request has no prompt token ids and the engine has no tokenizer");
    r->prompt_token_ids = tokenizer_->encode(r->prompt, /*add_special_tokens=*/true);
  } else {
    r->prompt_token_ids = std::move(in.prompt_token_ids);
  }
  const int64_t vocab = executor_->model_config().vocab_size;
  for (int32_t t : r->prompt_token_ids)
    if (t < 0 || t >= vocab)
      throw ConfigError("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                        std::to_string(vocab) + ")");
  r->params = std::move(in.params);
  r->seed = r->params.seed() ? *r->params.seed() : mix64(args_.seed(), r->id);
  return r;
}

uint64_t Engine::add_request(RequestInput input) { return add_requests({std::move(input)}).front(); }

std::vector<uint64_t> Engine::add_requests(std::vector<RequestInput> inputs) {
  std::vector<RequestPtr> reqs;
  for (auto& in : inputs) reqs.push_back(make_request(std::move(in)));
  for (const auto& r : reqs) scheduler_->check(*r);  // all or none
  std::map<std::string, std::vector<const Request*>> groups;
  for (const auto& r : reqs)
    if (!r->params.group_id().empty()) groups[r->params.group_id()].push_back(r.get());
  for (const auto& [id, group] : groups) scheduler_->check_group(group);
  std::vector<uint64_t> ids;
  for (auto& r : reqs) {
    r->arrival = next_arrival_++;
    ids.push_back(r->id);
    live_[r->id] = r;
    scheduler_->add(r);
  }
  return ids;
}

bool Engine::abort(uint64_t id) {
  if (!scheduler_->abort(id)) return false;
  to_report_.push_back(id);
  return true;
}

bool Engine::has_unfinished() const { return scheduler_->has_unfinished() || !to_report_.empty(); }

void Engine::process_text(Request& r, size_t first_new) {
  if (!tokenizer_) return;
  auto it = decoders_.find(r.id);
  if (it == decoders_.end())
    // Generated text continues the prompt: a SentencePiece "▁" on its first token is a real space.
    it = decoders_.emplace(r.id, StreamDecoder(*tokenizer_, r.params.skip_special_tokens(), false)).first;
  StreamDecoder& dec = it->second;
  const size_t old_len = r.text.size();
  const size_t n = r.output_token_ids.size();
  for (size_t i = first_new; i < n; ++i) {
    const int32_t tok = r.output_token_ids[i];
    // A token that ended the request by being a stop token adds no text.
    const bool is_last = i + 1 == n;
    if (is_last && r.finish_reason == FinishReason::kStop && r.status != RequestStatus::kRunning) {
      const auto& ids = r.params.stop_token_ids();
      const bool stop_id = std::find(ids.begin(), ids.end(), tok) != ids.end() ||
                           (!r.params.ignore_eos() && executor_->model_config().is_eos(tok));
      if (stop_id) continue;
    }
    r.text += dec.push(tok);
  }
  if (r.status != RequestStatus::kRunning) r.text += dec.flush();
  // Stop strings: only the new text (plus a stop string's length of context) can hold a new match.
  size_t longest = 0;
  for (const auto& s : r.params.stop()) longest = std::max(longest, s.size());
  if (longest == 0 || r.status != RequestStatus::kRunning) return;
  const size_t from = old_len + 1 > longest ? old_len + 1 - longest : 0;
  size_t cut = std::string::npos;
  for (const auto& s : r.params.stop()) cut = std::min(cut, r.text.find(s, from));
  if (cut != std::string::npos) {
    r.text.resize(cut);
    scheduler_->finish(r.id, FinishReason::kStop);
  }
}

RequestOutput Engine::snapshot(const Request& r) const {
  RequestOutput o;
  o.request_id = r.id;
  o.prompt = r.prompt;
  o.prompt_token_ids = r.prompt_token_ids;
  o.text = r.text;
  o.token_ids = r.output_token_ids;
  o.logprobs = r.logprobs;
  o.finish_reason = r.finish_reason;
  o.error = r.error;
  return o;
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs;
  if (!broken_.empty()) return outputs;
  SchedulerOutput so = scheduler_->schedule();
  ModelRunnerOutput out;
  if (!so.empty()) {
    try {
      out = executor_->execute(so);
    } catch (const std::exception& e) {
      return recover(e.what());
    }
  }
  std::vector<RequestPtr> changed = scheduler_->update(so, out);
  for (RequestPtr& r : scheduler_->take_unschedulable()) changed.push_back(std::move(r));
  for (uint64_t id : to_report_) {
    auto it = live_.find(id);
    if (it != live_.end() && std::find(changed.begin(), changed.end(), it->second) == changed.end())
      changed.push_back(it->second);
  }
  to_report_.clear();
  for (const RequestPtr& r : changed) {
    if (!live_.count(r->id)) continue;
    size_t& emitted = emitted_tokens_[r->id];
    process_text(*r, emitted);
    emitted = r->output_token_ids.size();
    const bool final =
        r->status == RequestStatus::kFinished || (r->status == RequestStatus::kFinishing && !r->has_payload());
    RequestOutput o = snapshot(*r);
    if (final) {
      o.finished = true;
      o.saves = r->saves;
      live_.erase(r->id);
      decoders_.erase(r->id);
      emitted_tokens_.erase(r->id);
    }
    outputs.push_back(std::move(o));
  }
  return outputs;
}

std::vector<RequestOutput> Engine::recover(const std::string& failure) {
  std::vector<RequestOutput> failed = fail_all(kWorkersFailed + failure);
  const int64_t limit = args_.max_worker_restarts();
  std::string why = "restarts are off (EngineArgs.max_worker_restarts 0)";
  if (limit != 0 && (limit < 0 || restarts_ < limit)) {
    log_warning("the engine's workers failed (" + failure + "); starting them again");
    if (executor_->restart(&why)) {
      ++restarts_;
      scheduler_ = std::make_unique<Scheduler>(scheduler_config());  // empty caches, maybe another size
      return failed;
    }
    why = "starting them again failed: " + why;
  } else if (limit > 0) {
    why = "restarted " + std::to_string(restarts_) + " times already (EngineArgs.max_worker_restarts)";
  }
  broken_ = failure + "; " + why;
  return failed;
}

std::vector<RequestOutput> Engine::fail_all(const std::string& message) {
  std::vector<RequestOutput> outputs;
  for (auto& [id, r] : live_) {
    r->status = RequestStatus::kFinished;
    r->finish_reason = FinishReason::kError;
    r->error = message;
    RequestOutput o = snapshot(*r);
    o.finished = true;
    outputs.push_back(std::move(o));
  }
  live_.clear();
  decoders_.clear();
  emitted_tokens_.clear();
  scheduler_ = std::make_unique<Scheduler>(scheduler_->config());
  return outputs;
}

}  // namespace nnsight::runner
