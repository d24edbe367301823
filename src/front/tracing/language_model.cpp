// LanguageModel (include/nnsight/language_model.hpp): records trace bodies,
// submits their requests as one group, and assembles the results.
#include <nnsight/error.hpp>
#include <nnsight/interrupt.hpp>
#include <nnsight/language_model.hpp>
#include <nnsight/llm.hpp>

#include <atomic>
#include <chrono>
#include <mutex>

#include "runner/engine/llm_access.h"
#include "core/model_path.h"
#include "core/weight_source.h"
#include "front/remote/model_config_json.h"
#include "front/remote/remote_model.h"
#include "front/tracing/collect_trace_result.h"
#include "front/tracing/interrupt.h"
#include "front/tracing/trace_recorder.h"
#include "runner/engine/async_engine.h"

namespace nnsight {

struct LanguageModel::Impl {
  EngineArgs args;
  std::unique_ptr<LLM> llm;
  // Set instead of llm when the model is served elsewhere (EngineArgs::remote).
  std::unique_ptr<remote::RemoteModel> remote;
  std::atomic<uint64_t> next_trace{1};
  // The model file opened in this process for parameter(); opened on first use.
  std::mutex weights_mu;
  std::unique_ptr<WeightSource> weights;

  const runner::ModelStructure& structure() const {
    return remote ? remote->structure() : runner::LLMAccess::engine(*llm).model_structure();
  }
  LLM& local() const {
    if (!llm)
      throw Error("this LanguageModel runs on the server at " + args.remote() + "; it has no engine in this process");
    return *llm;
  }

  // Runs the body in this thread, recording; returns the requests to submit.
  std::vector<runner::RequestInput> record(bool implicit, bool has_prompt, const std::string& prompt,
                                           const std::vector<int32_t>& ids, const SamplingParams& params,
                                           const Body& body, const SourceLoc& loc) {
    params.validate();
    if (tracing::TraceRecorder::current())
      throw TraceError(loc.str() + ": a trace cannot be started inside another trace's body");
    tracing::TraceRecorder rec(structure(), params, next_trace.fetch_add(1));
    tracing::TraceRecorder::Scope scope(&rec);
    Tracer tracer(rec);
    if (implicit) {
      rec.run_invoke(
          has_prompt, prompt, ids, params, [&] { body(tracer); }, loc);
    } else {
      body(tracer);
    }
    return rec.finish(loc);
  }

  TraceFuture submit(std::vector<runner::RequestInput> requests) {
    if (remote) return remote->submit(requests);
    // Fulfilled on the engine's loop thread once every request of the trace is done.
    auto promise = std::make_shared<std::promise<TraceResult>>();
    std::future<TraceResult> future = promise->get_future();
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    auto on_done = [promise, cancelled](std::vector<RequestOutput> outputs, std::exception_ptr error) {
      if (error) return promise->set_exception(error);
      try {
        if (cancelled->load())
          for (const auto& o : outputs)
            if (o.finish_reason == FinishReason::kAbort || o.finish_reason == FinishReason::kError)
              throw TraceError("the trace was cancelled before it finished");
        promise->set_value(tracing::collect_trace_result(std::move(outputs)));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    };
    runner::AsyncEngine& engine = runner::LLMAccess::engine(*llm);
    auto handles = engine.submit_group(std::move(requests), {}, std::move(on_done));
    std::vector<uint64_t> ids;
    for (const auto& h : handles) ids.push_back(h.id);
    return TraceFuture(
        std::move(future),
        [&engine, ids, cancelled] {
          cancelled->store(true);
          for (uint64_t id : ids) engine.abort(id);
        },
        tracing::interrupt_count());
  }
};

void TraceFuture::wait() const {
  // Polls the interrupt counter (a signal handler can only bump a counter).
  while (future_.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
    if (tracing::interrupt_count() != interrupts_at_) {
      cancel();
      future_.wait();
      throw Interrupted("the trace was interrupted; its requests were aborted");
    }
  }
  // Finished, but interrupted before it was collected: the caller asked to stop.
  if (tracing::interrupt_count() != interrupts_at_) throw Interrupted("the trace was interrupted");
}

TraceResult TraceFuture::get() {
  wait();
  return future_.get();
}

LanguageModel::LanguageModel(const EngineArgs& args) : impl_(std::make_unique<Impl>()) {
  impl_->args = args;
  if (!args.remote().empty())
    impl_->remote = std::make_unique<remote::RemoteModel>(args.remote(), args.api_key(), args.model());
  else
    impl_->llm = std::make_unique<LLM>(args);
}

LanguageModel::~LanguageModel() = default;

LLM& LanguageModel::llm() { return impl_->local(); }

TraceResult LanguageModel::trace(const std::string& prompt, const SamplingParams& params, const Body& body,
                                 CallSite site) {
  return submit(prompt, params, body, site).get();
}

TraceResult LanguageModel::trace(const std::vector<int32_t>& ids, const SamplingParams& params, const Body& body,
                                 CallSite site) {
  return submit(ids, params, body, site).get();
}

TraceFuture LanguageModel::submit(const std::vector<int32_t>& ids, const SamplingParams& params, const Body& body,
                                  CallSite site) {
  if (ids.empty()) throw TraceError(site.loc().str() + ": the prompt token ids are empty");
  return impl_->submit(impl_->record(true, true, "", ids, params, body, site.loc()));
}

TraceResult LanguageModel::trace(const SamplingParams& params, const Body& body, CallSite site) {
  return submit(params, body, site).get();
}

TraceResult LanguageModel::generate(const std::string& prompt, const SamplingParams& params, const Body& body,
                                    CallSite site) {
  return trace(prompt, params, body, site);
}

TraceResult LanguageModel::generate(const SamplingParams& params, const Body& body, CallSite site) {
  return trace(params, body, site);
}

TraceFuture LanguageModel::submit(const std::string& prompt, const SamplingParams& params, const Body& body,
                                  CallSite site) {
  return impl_->submit(impl_->record(true, true, prompt, {}, params, body, site.loc()));
}

TraceFuture LanguageModel::submit(const SamplingParams& params, const Body& body, CallSite site) {
  return impl_->submit(impl_->record(false, false, "", {}, params, body, site.loc()));
}

Envoy LanguageModel::envoy(const std::string& path, CallSite site) const {
  // A module, or a container of modules ("model.layers"): some path lies below it.
  auto is_container = [&] {
    const std::string prefix = path + ".";
    for (const auto& m : impl_->structure().modules())
      if (m.path.compare(0, prefix.size(), prefix) == 0) return true;
    return false;
  };
  if (!impl_->structure().find_module(path) && (path.empty() || !is_container()))
    throw TraceError(site.loc().str() + ": unknown module path '" + path + "' (did you mean '" +
                     impl_->structure().closest_path(path) + "'?)");
  return Envoy(this, path);
}

namespace {
Proxy read_key(const std::string& key, const CallSite& site) {
  const SourceLoc loc = site.loc();
  auto* rec = tracing::TraceRecorder::current();
  if (!rec) throw TraceError(loc.str() + ": " + key + " is read outside a trace body");
  auto b = rec->builder(loc);
  return Proxy(b, b->get(key, rec->step_for(key, loc), loc));
}
}  // namespace

Proxy LanguageModel::logits(CallSite site) const { return read_key("logits", site); }
Proxy LanguageModel::samples(CallSite site) const { return read_key("samples", site); }

std::vector<std::string> LanguageModel::module_paths() const {
  std::vector<std::string> out;
  for (const auto& m : impl_->structure().modules()) out.push_back(m.path);
  return out;
}

bool LanguageModel::callable(const std::string& path) const {
  const auto* m = impl_->structure().find_module(path);
  return m != nullptr && m->callable;
}

std::string LanguageModel::type_name(const std::string& path) const {
  const auto* m = impl_->structure().find_module(path);
  return m ? m->type_name : "";
}

ModelConfigInfo LanguageModel::config() const {
  if (impl_->remote) return remote::config_info_from_json(impl_->remote->config());
  return remote::config_info(runner::LLMAccess::engine(impl_->local()).model_config());
}

std::string LanguageModel::architecture() const { return config().architecture; }

int64_t LanguageModel::num_layers() const { return config().num_layers; }

at::Tensor LanguageModel::parameter(const std::string& name) const {
  if (impl_->remote)
    throw Error("parameter('" + name + "'): the model is served at " + impl_->args.remote() +
                " and its file is not in this process; run the module inside the trace instead (lm.envoy(path)(x))");
  std::lock_guard<std::mutex> lock(impl_->weights_mu);
  if (!impl_->weights) impl_->weights = open_weights(resolve_model_path(impl_->args.model()));
  const WeightSource& w = *impl_->weights;
  if (w.has(name)) return w.load(name);
  // A tied LM head is the token embedding.
  if (name == "lm_head.weight" && w.config().tie_word_embeddings) {
    for (const char* embed : {"model.embed_tokens.weight", "transformer.wte.weight"})
      if (w.has(embed)) return w.load(embed);
  }
  std::string known;
  for (const auto& n : w.names()) {
    if (known.size() > 200) {
      known += ", ...";
      break;
    }
    known += (known.empty() ? "" : ", ") + n;
  }
  throw Error("the model " + w.describe() + " has no parameter '" + name + "' (it has: " + known + ")");
}

std::vector<int32_t> LanguageModel::encode(const std::string& text, bool add_special_tokens) const {
  if (impl_->remote) return impl_->remote->encode(text, add_special_tokens);
  return impl_->llm->encode(text, add_special_tokens);
}

std::string LanguageModel::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  if (impl_->remote) return impl_->remote->decode(ids, skip_special_tokens);
  return impl_->llm->decode(ids, skip_special_tokens);
}

}  // namespace nnsight
