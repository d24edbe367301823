// LanguageModel (include/nnsight/language_model.hpp): records trace bodies and
// submits their requests as one group through its TraceBackend (an engine in
// this process, or a server).
#include <nnsight/error.hpp>
#include <nnsight/language_model.hpp>
#include <nnsight/llm.hpp>

#include <atomic>
#include <mutex>

#include "front/trace_client/local_trace_backend.h"
#include "front/trace_client/remote_trace_backend.h"
#include "front/trace_client/scan_trace.h"
#include "front/trace_client/trace_recorder.h"

namespace nnsight {

struct LanguageModel::Impl {
  // Shared by the models edit() makes from this one (one engine, one trace
  // id counter: trace ids are unique per engine).
  std::shared_ptr<tracing::TraceBackend> backend;
  std::shared_ptr<std::atomic<uint64_t>> next_trace = std::make_shared<std::atomic<uint64_t>>(1);
  // This model's persistent edits, in the order they were made.
  mutable std::mutex edits_mu;
  std::vector<dsl::Graph> edits;

  const runner::ModelStructure& structure() const { return backend->structure(); }

  std::vector<dsl::Graph> edits_now() const {
    std::lock_guard<std::mutex> lock(edits_mu);
    return edits;
  }

  // Records an edit's body in this thread: one invoke without a prompt.
  dsl::Graph record_edit(const Body& body, const SourceLoc& loc) {
    if (tracing::TraceRecorder::current())
      throw TraceError(loc.str() + ": an edit cannot be made inside a trace's body");
    SamplingParams params;
    tracing::TraceRecorder rec(structure(), params, next_trace->fetch_add(1));
    tracing::TraceRecorder::Scope scope(&rec);
    Tracer tracer(rec);
    rec.run_invoke(
        false, "", {}, params, [&] { body(tracer); }, loc);
    return rec.finish_edit(loc);
  }

  // Runs the body in this thread, recording; returns the requests to submit.
  std::vector<runner::RequestInput> record(bool implicit, bool has_prompt, const std::string& prompt,
                                           const std::vector<int32_t>& ids, const SamplingParams& params,
                                           const Body& body, const SourceLoc& loc, uint32_t* num_edits = nullptr) {
    params.validate();
    if (tracing::TraceRecorder::current())
      throw TraceError(loc.str() + ": a trace cannot be started inside another trace's body");
    std::vector<dsl::Graph> trace_edits = edits_now();
    if (num_edits) *num_edits = static_cast<uint32_t>(trace_edits.size());
    tracing::TraceRecorder rec(structure(), params, next_trace->fetch_add(1), std::move(trace_edits));
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

  TraceFuture submit(std::vector<runner::RequestInput> requests) { return backend->submit(std::move(requests)); }

  // The recorded requests' graphs on meta tensors (front/trace_client/scan_trace.h).
  ScanResult scan(std::vector<runner::RequestInput> requests, uint32_t num_edits) const {
    std::vector<int64_t> tokens;
    for (const auto& r : requests)
      tokens.push_back(static_cast<int64_t>(r.prompt_token_ids.empty() ? backend->encode(r.prompt, true).size()
                                                                       : r.prompt_token_ids.size()));
    return tracing::scan_trace(structure(), requests, tokens, num_edits, dsl::Limits());
  }
};

LanguageModel::LanguageModel(const EngineArgs& args) : impl_(std::make_unique<Impl>()) {
  if (!args.remote().empty())
    impl_->backend = std::make_unique<tracing::RemoteTraceBackend>(args);
  else
    impl_->backend = std::make_unique<tracing::LocalTraceBackend>(args);
}

LanguageModel::LanguageModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LanguageModel::~LanguageModel() = default;
LanguageModel::LanguageModel(LanguageModel&&) noexcept = default;
LanguageModel& LanguageModel::operator=(LanguageModel&&) noexcept = default;

LanguageModel LanguageModel::edit(const Body& body, CallSite site) const {
  dsl::Graph g = impl_->record_edit(body, site.loc());
  auto impl = std::make_unique<Impl>();
  impl->backend = impl_->backend;
  impl->next_trace = impl_->next_trace;
  impl->edits = impl_->edits_now();
  impl->edits.push_back(std::move(g));
  return LanguageModel(std::move(impl));
}

void LanguageModel::edit_inplace(const Body& body, CallSite site) {
  dsl::Graph g = impl_->record_edit(body, site.loc());
  std::lock_guard<std::mutex> lock(impl_->edits_mu);
  impl_->edits.push_back(std::move(g));
}

void LanguageModel::clear_edits() {
  std::lock_guard<std::mutex> lock(impl_->edits_mu);
  impl_->edits.clear();
}

size_t LanguageModel::num_edits() const {
  std::lock_guard<std::mutex> lock(impl_->edits_mu);
  return impl_->edits.size();
}

LLM& LanguageModel::llm() { return impl_->backend->llm(); }

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

ScanResult LanguageModel::scan(const std::string& prompt, const SamplingParams& params, const Body& body,
                               CallSite site) const {
  uint32_t edits = 0;
  auto requests = impl_->record(true, true, prompt, {}, params, body, site.loc(), &edits);
  return impl_->scan(std::move(requests), edits);
}

ScanResult LanguageModel::scan(const std::vector<int32_t>& ids, const SamplingParams& params, const Body& body,
                               CallSite site) const {
  if (ids.empty()) throw TraceError(site.loc().str() + ": the prompt token ids are empty");
  uint32_t edits = 0;
  auto requests = impl_->record(true, true, "", ids, params, body, site.loc(), &edits);
  return impl_->scan(std::move(requests), edits);
}

ScanResult LanguageModel::scan(const SamplingParams& params, const Body& body, CallSite site) const {
  uint32_t edits = 0;
  auto requests = impl_->record(false, false, "", {}, params, body, site.loc(), &edits);
  return impl_->scan(std::move(requests), edits);
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

ModelConfigInfo LanguageModel::config() const { return impl_->backend->config(); }

std::string LanguageModel::architecture() const { return config().architecture; }

int64_t LanguageModel::num_layers() const { return config().num_layers; }

at::Tensor LanguageModel::parameter(const std::string& name) const { return impl_->backend->parameter(name); }

std::vector<int32_t> LanguageModel::encode(const std::string& text, bool add_special_tokens) const {
  return impl_->backend->encode(text, add_special_tokens);
}

std::string LanguageModel::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return impl_->backend->decode(ids, skip_special_tokens);
}

}  // namespace nnsight
