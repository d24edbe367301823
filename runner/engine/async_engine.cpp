#include "runner/engine/async_engine.h"

#include <string>

#include <nnsight/error.hpp>

#include "core/log.h"
#include "runner/engine/engine_failure.h"

namespace nnsight::runner {

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine)
    : engine_(std::move(engine)),
      tokenizer_(engine_->tokenizer()),
      config_(engine_->model_config()),
      structure_(engine_->model_structure()) {
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() { shutdown(); }

RequestHandle AsyncEngine::submit(RequestInput input, StreamCallback on_update) {
  std::vector<StreamCallback> cbs;
  cbs.push_back(std::move(on_update));
  std::vector<RequestInput> inputs;
  inputs.push_back(std::move(input));
  return submit_group(std::move(inputs), std::move(cbs)).front();
}

std::vector<RequestHandle> AsyncEngine::submit_group(std::vector<RequestInput> inputs,
                                                     std::vector<StreamCallback> on_update, GroupCallback on_done) {
  Pending p;
  std::vector<RequestHandle> handles;
  for (auto& in : inputs) {
    in.params.validate();
    // Tokenize here: the tokenizer is thread-safe, and the loop stays free.
    if (in.prompt_token_ids.empty() && tokenizer_) in.prompt_token_ids = tokenizer_->encode(in.prompt, true);
  }
  on_update.resize(inputs.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) throw Error("the engine is shut down");
    for (size_t i = 0; i < inputs.size(); ++i) {
      inputs[i].id = next_id_++;
      auto promise = std::make_shared<std::promise<RequestOutput>>();
      handles.push_back(RequestHandle{inputs[i].id, promise->get_future().share()});
      p.promises.push_back(std::move(promise));
    }
    p.inputs = std::move(inputs);
    p.callbacks = std::move(on_update);
    p.on_done = std::move(on_done);
    pending_.push_back(std::move(p));
  }
  cv_.notify_one();
  return handles;
}

void AsyncEngine::abort(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_one();
}

void AsyncEngine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void AsyncEngine::loop() {
  auto deliver = [&](const std::vector<RequestOutput>& outputs) {
    for (const auto& o : outputs) {
      auto it = live_.find(o.request_id);
      if (it == live_.end()) continue;
      if (it->second.callback) {
        try {
          it->second.callback(o);
        } catch (const std::exception& e) {
          log_error("a streaming callback of request " + std::to_string(o.request_id) + " threw: " + e.what());
        }
      }
      if (o.finished) {
        it->second.promise->set_value(o);
        std::shared_ptr<GroupState> group = std::move(it->second.group);
        const size_t index = it->second.index;
        live_.erase(it);
        if (group) {
          group->outputs[index] = o;
          if (--group->remaining == 0) {
            try {
              group->on_done(std::move(group->outputs), nullptr);
            } catch (const std::exception& e) {
              log_error(std::string("a group callback threw: ") + e.what());
            }
          }
        }
      }
    }
  };
  while (true) {
    std::deque<Pending> pending;
    std::vector<uint64_t> aborts;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty() || !aborts_.empty() || engine_->has_unfinished(); });
      pending.swap(pending_);
      aborts.swap(aborts_);
      stopping = stop_;
    }
    for (auto& p : pending) {
      try {
        engine_->add_requests(p.inputs);
        std::shared_ptr<GroupState> group;
        if (p.on_done) {
          group = std::make_shared<GroupState>();
          group->on_done = std::move(p.on_done);
          group->outputs.resize(p.inputs.size());
          group->remaining = p.inputs.size();
        }
        for (size_t i = 0; i < p.inputs.size(); ++i)
          live_[p.inputs[i].id] = Live{p.callbacks[i], p.promises[i], group, i};
      } catch (...) {
        for (auto& pr : p.promises) pr->set_exception(std::current_exception());
        if (p.on_done) p.on_done({}, std::current_exception());
      }
    }
    for (uint64_t id : aborts) engine_->abort(id);
    if (stopping) {
      deliver(engine_->fail_all(kEngineShutDown));
      engine_.reset();  // shuts the executor (and its workers) down
      return;
    }
    if (engine_->has_unfinished()) {
      try {
        deliver(engine_->step());
      } catch (const std::exception& e) {
        deliver(engine_->fail_all(kStepFailed + std::string(e.what())));
      }
    }
  }
}

}  // namespace nnsight::runner
