#include "server/trace_service.h"

#include <malloc.h>

#include <algorithm>

#include <nnsight/error.hpp>

#include "core/log.h"
#include "front/trace_client/collect_trace_result.h"
#include "front/trace_client/graph_trace.h"
#include "dsl/dtype.h"
#include "front/trace_client/scan_trace.h"
#include "front/trace_client/saves_to_host.h"
#include "front/trace_client/submit_trace.h"
#include "front/trace_client/trace_result_file.h"
#include "front/trace_worker/trace_payload.h"
#include "runner/engine/engine_failure.h"
#include "server/http_error.h"
#include "server/random_id.h"
#include "server/trace_request.h"

namespace nnsight::server {
namespace {

constexpr size_t kMaxRecords = 100000;  // trace records kept (ended ones are dropped oldest first beyond)

const char* state_name(int s) {
  static const char* names[] = {"queued", "running", "done", "failed", "cancelled"};
  return names[s];
}

}  // namespace

TraceService::TraceService(ReplicaSet& replicas, TenantLimits& limits, const ServeOptions& options,
                           const EditRegistry* edits)
    : replicas_(replicas), limits_(limits), edits_(edits), options_(options) {
  completion_thread_ = std::thread([this] { completion_loop(); });
  watchdog_thread_ = std::thread([this] { watchdog_loop(); });
}

TraceService::~TraceService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, t] : traces_)
      if (t->state == State::kRunning)
        for (uint64_t r : t->request_ids) replicas_.engine(t->replica).abort(r);
  }
  // The engines finish the aborted requests at their next step; their
  // completions are still taken before the threads stop.
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(10), [&] {
      for (auto& [id, t] : traces_)
        if (t->state == State::kRunning) return false;
      return true;
    });
    stop_ = true;
  }
  completions_cv_.notify_all();
  changed_.notify_all();
  completion_thread_.join();
  watchdog_thread_.join();
}

void TraceService::shut_down() {
  std::vector<std::pair<std::string, std::string>> live;  // tenant, id
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    for (const auto& [id, t] : traces_)
      if (t->state == State::kQueued || t->state == State::kRunning) live.emplace_back(t->tenant, id);
  }
  for (const auto& [tenant, id] : live) cancel(tenant, id);
  changed_.notify_all();
}

std::shared_ptr<TraceService::Trace> TraceService::find(const std::string& tenant, const std::string& id) const {
  auto it = traces_.find(id);
  if (it == traces_.end() || it->second->tenant != tenant) throw HttpError(404, "no trace '" + id + "' for this key");
  return it->second;
}

std::vector<dsl::Graph> TraceService::edits_of(const std::string& tenant, const nlohmann::json& body) const {
  if (!body.is_object() || !body.contains("edits")) return {};
  if (!edits_) throw HttpError(400, "\"edits\": this server keeps no named edits");
  return edits_->graphs(tenant, body["edits"]);
}

namespace {
nlohmann::json scanned_json(const ScannedValue& v) {
  nlohmann::json j = nlohmann::json::object();
  if (v.is_none) return nullptr;
  if (v.is_tensor) {
    j["shape"] = v.shape;
    j["dtype"] = dsl::dtype_name(v.dtype);
  } else if (!v.items.empty() || v.kind == "tuple" || v.kind == "list") {
    j["items"] = nlohmann::json::array();
    for (const auto& item : v.items) j["items"].push_back(scanned_json(item));
  } else {
    j["kind"] = v.kind;
  }
  return j;
}
}  // namespace

nlohmann::json TraceService::scan(const std::string& tenant, const nlohmann::json& body) {
  const std::vector<dsl::Graph> edits = edits_of(tenant, body);
  TraceRequest req = parse_trace_request(body, replicas_.structure(), graph_limits_, tracing::next_trace_id(), edits);
  std::vector<int64_t> tokens;
  for (const auto& r : req.requests)
    tokens.push_back(static_cast<int64_t>(r.prompt_token_ids.empty() ? replicas_.first().encode(r.prompt).size()
                                                                     : r.prompt_token_ids.size()));
  ScanResult s;
  try {
    s = tracing::scan_trace(replicas_.structure(), req.requests, tokens, static_cast<uint32_t>(edits.size()),
                            graph_limits_);
  } catch (const std::exception& e) {
    throw HttpError(400, e.what());
  }
  nlohmann::json values = nlohmann::json::array();
  for (const auto& v : s.values()) {
    nlohmann::json j = scanned_json(v);
    if (j.is_null()) j = {{"kind", "None"}};
    j["invoke"] = v.invoke;
    j["node"] = v.node;
    j["what"] = v.what;
    j["where"] = v.where;
    values.push_back(std::move(j));
  }
  nlohmann::json saves = nlohmann::json::object();
  for (const auto& [name, v] : s.saves()) saves[name] = scanned_json(v);
  return {{"object", "scan"}, {"values", values}, {"saves", saves}};
}

std::string TraceService::submit(const std::string& tenant, const nlohmann::json& body) {
  if (body.contains("model") && body["model"].is_string() && !options_.served_model_name.empty() &&
      body["model"].get<std::string>() != options_.served_model_name)
    throw HttpError(
        404, "this server serves '" + options_.served_model_name + "', not '" + body["model"].get<std::string>() + "'");
  if (shutting_down_) throw HttpError(503, "the server is shutting down");
  TraceRequest req =
      parse_trace_request(body, replicas_.structure(), graph_limits_, tracing::next_trace_id(), edits_of(tenant, body));
  // The workers count the saves as they are made: the save that crosses the
  // limit fails the trace at its step. The payload bytes pass through as the
  // checks above read them; only sampling params change.
  // A client may ask for a smaller limit, never a larger one.
  const int64_t limit = limits_.options().max_saved_bytes;
  for (auto& r : req.requests) {
    const int64_t asked = r.params.max_saved_bytes();
    r.params.max_saved_bytes(asked > 0 ? std::min(asked, limit) : limit);
  }
  if (limits_.options().max_tokens_per_minute > 0) {
    // Counting needs the prompts' tokens: the engine gets them too, so it
    // does not tokenize again.
    int64_t tokens = req.max_tokens;
    for (auto& r : req.requests) {
      if (r.prompt_token_ids.empty()) r.prompt_token_ids = replicas_.first().encode(r.prompt);
      tokens += static_cast<int64_t>(r.prompt_token_ids.size());
    }
    limits_.charge_tokens(tenant, tokens);
  }

  auto t = std::make_shared<Trace>();
  t->id = random_id("tr_");
  t->tenant = tenant;
  t->prompts = req.prompts;
  t->prompt_of = req.prompt_of;
  t->created = std::chrono::system_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    traces_[t->id] = t;
  }
  auto requests = std::make_shared<std::vector<runner::RequestInput>>(std::move(req.requests));
  try {
    limits_.enqueue(tenant, t->id, [this, t, requests] { start(t, std::move(*requests)); });
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    traces_.erase(t->id);
    throw;
  }
  return t->id;
}

void TraceService::start(const std::shared_ptr<Trace>& t, std::vector<runner::RequestInput> requests) {
  const int64_t n = static_cast<int64_t>(requests.size());
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = t->state != State::kQueued;
    if (!cancelled) {
      t->replica = replicas_.acquire(n);
      t->num_requests = n;
      t->state = State::kRunning;
      t->started = std::chrono::steady_clock::now();
    }
  }
  if (cancelled) {  // while it was queued: its place passes on
    limits_.finished(t->tenant);
    return;
  }
  changed_.notify_all();
  const size_t replica = t->replica;
  auto on_step = [this, t](const RequestOutput& o) {
    std::lock_guard<std::mutex> lock(mu_);
    t->step = std::max<int64_t>(t->step, static_cast<int64_t>(o.token_ids.size()));
  };
  const std::string id = t->id;
  // Outputs arrive in prompt order (an invoke's requests are contiguous).
  auto on_done = [this, id](std::vector<RequestOutput> outputs, std::exception_ptr error) {
    // The engine's loop thread: start the saves' copies off a GPU (only
    // enqueued here), hand over, land and encode elsewhere. The notify is
    // made under the lock: once the completion is taken the trace may end and
    // the destructor destroy completions_cv_ (TSan saw the engine thread
    // signal a destroyed condition variable in HttpFuzzSeeds).
    auto saves = std::make_shared<tracing::SavesToHost>(outputs);
    std::lock_guard<std::mutex> lock(mu_);
    completions_.push_back(Completion{id, std::move(outputs), error, std::move(saves)});
    completions_cv_.notify_one();
  };
  std::vector<runner::RequestHandle> handles;
  try {
    handles = tracing::submit_trace(replicas_.engine(replica), std::move(requests), std::move(on_done),
                                    tracing::TraceSubmitOptions().order(t->prompt_of).progress(std::move(on_step)));
  } catch (const std::exception& e) {  // refused at submission (a group that can never run, bad params)
    limits_.finished(t->tenant);
    {
      std::lock_guard<std::mutex> lock(mu_);
      replicas_.release(replica, n);
      t->state = State::kFailed;
      t->error = e.what();
      t->error_status = 400;
      t->finished = std::chrono::steady_clock::now();
    }
    changed_.notify_all();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& h : handles) t->request_ids.push_back(h.id);
  if (t->cancel_requested || t->timed_out)
    for (uint64_t r : t->request_ids) replicas_.engine(replica).abort(r);
}

void TraceService::completion_loop() {
  for (;;) {
    Completion c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      completions_cv_.wait(lock, [&] { return stop_ || !completions_.empty(); });
      if (completions_.empty()) return;
      c = std::move(completions_.front());
      completions_.pop_front();
    }
    complete(std::move(c));
  }
}

void TraceService::complete(Completion c) {
  std::shared_ptr<Trace> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = traces_.find(c.id);
    if (it == traces_.end()) return;
    t = it->second;
  }
  State state = State::kDone;
  std::string error, saves;
  int error_status = 0;
  std::vector<std::string> texts;
  try {
    if (c.error) std::rethrow_exception(c.error);
    // A copy off the GPU that failed is the server's fault (503), not the trace's.
    if (c.saves && !c.saves->land(c.outputs)) {
      error_status = 503;
      for (const auto& o : c.outputs)
        if (!o.error.empty()) throw Error(o.error);
    }
    // Why a request failed decides the status: the engine failing under it
    // is the server's (503); a save over the limit is 413; the rest (an
    // intervention's error) is the client's trace (422).
    for (const auto& o : c.outputs) {
      if (o.finish_reason != FinishReason::kError) continue;
      error_status = runner::is_engine_failure(o.error)                         ? 503
                     : o.error.find("saved bytes limit: ") != std::string::npos ? 413
                                                                                : 422;
      throw Error(o.error);
    }
    for (const auto& o : c.outputs) texts.push_back(o.text);
    TraceResult result = tracing::collect_trace_result(std::move(c.outputs));
    saves = tracing::encode_trace_result(result, t->prompts);
    if (static_cast<int64_t>(saves.size()) > limits_.options().max_saved_bytes) {
      state = State::kFailed;
      error_status = 413;
      error = "saved bytes limit: the trace saved " + std::to_string(saves.size()) + " bytes; the limit is " +
              std::to_string(limits_.options().max_saved_bytes);
      saves.clear();
    }
  } catch (const ConfigError& e) {  // refused by the engine: a prompt it can never run, a token id it lacks
    state = State::kFailed;
    error_status = 400;
    error = e.what();
  } catch (const std::exception& e) {
    state = State::kFailed;
    if (error_status == 0) error_status = 422;
    error = e.what();
  }
  // The key's place is free before anyone can see the trace ended (a client
  // that reads the end and posts again must find it free).
  limits_.finished(t->tenant);
  {
    std::lock_guard<std::mutex> lock(mu_);
    replicas_.release(t->replica, t->num_requests);
    t->finished = std::chrono::steady_clock::now();
    t->texts = std::move(texts);
    std::vector<std::string>().swap(t->prompts);  // only the saves' metadata needed them
    if (t->timed_out) {
      state = State::kFailed;
      error_status = 422;
      error = "wall time limit: the trace ran longer than " + std::to_string(limits_.options().max_trace_seconds) +
              " s and was aborted";
      saves.clear();
    } else if (t->cancel_requested) {
      state = State::kCancelled;
      error_status = shutting_down_ ? 503 : 410;
      error = shutting_down_ ? "the server is shutting down; the trace was cancelled" : "the trace was cancelled";
      saves.clear();
    }
    t->state = state;
    t->error = error;
    t->error_status = error_status;
    t->saves_bytes = static_cast<int64_t>(saves.size());
    if (state == State::kDone) {
      t->saves = std::move(saves);
      retained_.push_back(t->id);
      retained_bytes_ += t->saves_bytes;
      // Newer saves need the room: the oldest unfetched ones go.
      while (retained_bytes_ > options_.max_retained_bytes && retained_.size() > 1) {
        auto it = traces_.find(retained_.front());
        retained_.pop_front();
        if (it != traces_.end() && !it->second->released)
          release_saves(*it->second, "its saves were dropped to make room for newer ones before they were fetched");
      }
    }
  }
  changed_.notify_all();
}

void TraceService::release_saves(Trace& t, const std::string& why) {
  if (t.released) return;
  retained_bytes_ -= static_cast<int64_t>(t.saves.size());
  std::string().swap(t.saves);
  t.released = true;
  t.released_why = why;
}

nlohmann::json TraceService::status(const std::string& tenant, const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_of(*find(tenant, id));
}

nlohmann::json TraceService::list(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Trace*> mine;
  for (const auto& [id, t] : traces_)
    if (t->tenant == tenant) mine.push_back(t.get());
  std::sort(mine.begin(), mine.end(), [](const Trace* a, const Trace* b) { return a->created > b->created; });
  nlohmann::json data = nlohmann::json::array();
  for (const Trace* t : mine) data.push_back(status_of(*t));
  return {{"object", "list"}, {"data", data}};
}

nlohmann::json TraceService::status_of(const Trace& tr) const {
  const Trace* t = &tr;
  nlohmann::json j = {
      {"id", t->id},
      {"object", "trace"},
      {"state", state_name(static_cast<int>(t->state))},
      {"step", t->step},
      {"created", std::chrono::duration_cast<std::chrono::seconds>(t->created.time_since_epoch()).count()}};
  if (!t->error.empty()) j["error"] = t->error;
  if (t->state == State::kDone) {
    j["saves_bytes"] = t->saves_bytes;
    j["texts"] = t->texts;
    j["saves_available"] = !t->released;
  }
  return j;
}

std::string TraceService::saves(const std::string& tenant, const std::string& id, bool wait,
                                const std::function<bool()>& client_gone) {
  std::unique_lock<std::mutex> lock(mu_);
  auto t = find(tenant, id);
  auto ended = [&] { return t->state != State::kQueued && t->state != State::kRunning; };
  if (!wait && !ended())
    throw HttpError(409, "trace '" + id + "' is " + state_name(static_cast<int>(t->state)) + " (step " +
                             std::to_string(t->step) + "); ask again, or add ?wait=1");
  while (!ended()) {
    changed_.wait_for(lock, std::chrono::milliseconds(50));
    if (stop_) throw HttpError(503, "the server is shutting down");
    if (!ended() && client_gone && client_gone()) {
      lock.unlock();
      cancel(tenant, id);
      throw HttpError(410, "the client went away; trace '" + id + "' was cancelled");
    }
  }
  if (t->state != State::kDone) throw HttpError(t->error_status, t->error);
  if (t->released) throw HttpError(410, "the saves of trace '" + id + "' are gone: " + t->released_why);
  std::string out = std::move(t->saves);
  t->saves.clear();
  retained_bytes_ -= static_cast<int64_t>(out.size());
  t->released = true;
  t->released_why = "they were fetched";
  return out;
}

void TraceService::cancel(const std::string& tenant, const std::string& id) {
  std::shared_ptr<Trace> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t = find(tenant, id);
    if (t->state == State::kRunning) {
      t->cancel_requested = true;
      for (uint64_t r : t->request_ids) replicas_.engine(t->replica).abort(r);
      return;
    }
    if (t->state != State::kQueued) return;
  }
  if (limits_.remove_queued(tenant, id)) {
    std::lock_guard<std::mutex> lock(mu_);
    t->state = State::kCancelled;
    t->error = shutting_down_ ? "the server is shutting down; the trace was cancelled before it started"
                              : "the trace was cancelled before it started";
    t->error_status = shutting_down_ ? 503 : 410;
    t->finished = std::chrono::steady_clock::now();  // its record is kept for the retention time from now
    changed_.notify_all();
  } else {
    // It is starting right now: abort it once its requests exist.
    std::lock_guard<std::mutex> lock(mu_);
    t->cancel_requested = true;
    for (uint64_t r : t->request_ids) replicas_.engine(t->replica).abort(r);
  }
}

void TraceService::watchdog_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto trimmed = std::chrono::steady_clock::now();
  while (!stop_) {
    changed_.wait_for(lock, std::chrono::milliseconds(200));
    const auto now = std::chrono::steady_clock::now();
    // Saves are large, short-lived and freed on many threads: glibc keeps the
    // freed pages in its per-thread arenas. Give them back now and then, so
    // the server's resident memory follows what it holds.
    if (now - trimmed > std::chrono::seconds(5)) {
      trimmed = now;
      lock.unlock();
      ::malloc_trim(0);
      lock.lock();
    }
    const auto wall = std::chrono::duration<double>(limits_.options().max_trace_seconds);
    const auto keep = std::chrono::duration<double>(options_.retention_s);
    for (auto it = traces_.begin(); it != traces_.end();) {
      Trace& t = *it->second;
      if (t.state == State::kRunning && !t.timed_out && now - t.started > wall) {
        t.timed_out = true;
        for (uint64_t r : t.request_ids) replicas_.engine(t.replica).abort(r);
      }
      const bool ended = t.state != State::kQueued && t.state != State::kRunning;
      if (ended && now - t.finished > keep) {
        if (!t.released) release_saves(t, "they were kept " + std::to_string(options_.retention_s) + " s unfetched");
        // The record itself goes after a second retention period.
        if (now - t.finished > 2 * keep) {
          it = traces_.erase(it);
          continue;
        }
      }
      ++it;
    }
    // Records are small, but a flood of them is not: beyond kMaxRecords the
    // oldest ended ones go early.
    if (traces_.size() > kMaxRecords) {
      std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> ended;
      for (const auto& [id, t] : traces_)
        if (t->state != State::kQueued && t->state != State::kRunning) ended.emplace_back(t->finished, id);
      std::sort(ended.begin(), ended.end());
      for (size_t i = 0; i < ended.size() && traces_.size() > kMaxRecords; ++i) {
        auto it = traces_.find(ended[i].second);
        release_saves(*it->second, "");
        traces_.erase(it);
      }
    }
    // retained_ may name released or erased traces: drop those from its head.
    while (!retained_.empty()) {
      auto f = traces_.find(retained_.front());
      if (f != traces_.end() && !f->second->released) break;
      retained_.pop_front();
    }
  }
}

}  // namespace nnsight::server
