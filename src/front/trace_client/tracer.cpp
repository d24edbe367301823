// Tracer (include/nnsight/tracer.hpp).
#include <algorithm>

#include <nnsight/error.hpp>
#include <nnsight/tracer.hpp>

#include "dsl/node.h"
#include "front/trace_client/trace_recorder.h"

namespace nnsight {

void Tracer::invoke(const std::string& prompt, const std::function<void()>& body, CallSite site) {
  rec_->run_invoke(true, prompt, {}, rec_->params(), body, site.loc());
}

void Tracer::invoke(const std::string& prompt, const SamplingParams& params, const std::function<void()>& body,
                    CallSite site) {
  params.validate();
  rec_->run_invoke(true, prompt, {}, params, body, site.loc());
}

void Tracer::invoke(const std::vector<int32_t>& ids, const std::function<void()>& body, CallSite site) {
  if (ids.empty()) throw TraceError(site.loc().str() + ": an invoke's prompt token ids are empty");
  rec_->run_invoke(true, "", ids, rec_->params(), body, site.loc());
}

void Tracer::invoke(const std::vector<int32_t>& ids, const SamplingParams& params, const std::function<void()>& body,
                    CallSite site) {
  if (ids.empty()) throw TraceError(site.loc().str() + ": an invoke's prompt token ids are empty");
  params.validate();
  rec_->run_invoke(true, "", ids, params, body, site.loc());
}

namespace {
// An invoke's list of prompts: non-empty, no prompt empty.
template <class P>
void check_prompts(const std::vector<P>& prompts, const char* what, const CallSite& site) {
  if (prompts.empty()) throw TraceError(site.loc().str() + ": an invoke's list of " + what + " is empty");
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty())
      throw TraceError(site.loc().str() + ": prompt " + std::to_string(i) + " of the invoke's " +
                       std::to_string(prompts.size()) + " " + what + " is empty");
}
}  // namespace

void Tracer::invoke(const std::vector<std::string>& prompts, const std::function<void()>& body, CallSite site) {
  invoke(prompts, rec_->params(), body, site);
}

void Tracer::invoke(const std::vector<std::string>& prompts, const SamplingParams& params,
                    const std::function<void()>& body, CallSite site) {
  check_prompts(prompts, "prompts", site);
  params.validate();
  rec_->run_invoke(prompts, {}, params, body, site.loc());
}

void Tracer::invoke(const std::vector<std::vector<int32_t>>& prompts_token_ids, const std::function<void()>& body,
                    CallSite site) {
  invoke(prompts_token_ids, rec_->params(), body, site);
}

void Tracer::invoke(const std::vector<std::vector<int32_t>>& prompts_token_ids, const SamplingParams& params,
                    const std::function<void()>& body, CallSite site) {
  check_prompts(prompts_token_ids, "token-id prompts", site);
  params.validate();
  rec_->run_invoke({}, prompts_token_ids, params, body, site.loc());
}

void Tracer::invoke(const std::function<void()>& body, CallSite site) {
  rec_->run_invoke(false, "", {}, rec_->params(), body, site.loc());
}

void Tracer::iter(int64_t start, int64_t stop, const std::function<void(const Step&)>& body, CallSite site) {
  iter(start, stop, 1, body, site);
}

void Tracer::iter(int64_t start, int64_t stop, int64_t stride, const std::function<void(const Step&)>& body,
                  CallSite site) {
  const SourceLoc loc = site.loc();
  if (start < 0 || stop < start || stride < 1)
    throw TraceError(loc.str() + ": iter(" + std::to_string(start) + ", " + std::to_string(stop) + ", " +
                     std::to_string(stride) + ") is not a valid step range");
  auto b = rec_->builder(loc);
  const dsl::NodeId node = b->begin_iter(dsl::IterRange::range(start, stop, stride), loc);
  rec_->push_iteration(loc);
  body(Step{Proxy(b, node)});
  rec_->pop_iteration(loc);
  b->end_iter(loc);
}

void Tracer::all(const std::function<void(const Step&)>& body, CallSite site) { all(0, 1, body, site); }

void Tracer::all(int64_t start, const std::function<void(const Step&)>& body, CallSite site) {
  all(start, 1, body, site);
}

void Tracer::all(int64_t start, int64_t stride, const std::function<void(const Step&)>& body, CallSite site) {
  const SourceLoc loc = site.loc();
  if (start < 0 || stride < 1)
    throw TraceError(loc.str() + ": all(" + std::to_string(start) + ", " + std::to_string(stride) +
                     ") is not a valid step range (start >= 0, stride >= 1)");
  auto b = rec_->builder(loc);
  const dsl::NodeId node = b->begin_iter(dsl::IterRange::all_from(start, stride), loc);
  rec_->push_iteration(loc);
  body(Step{Proxy(b, node)});
  rec_->pop_iteration(loc);
  b->end_iter(loc);
}

void Tracer::cond(const Operand& condition, const std::function<void()>& then, const std::function<void()>& otherwise) {
  const SourceLoc loc = condition.site().loc();
  auto b = rec_->builder(loc);
  b->begin_cond(rec_->node_of(condition, loc), loc);
  if (then) then();
  if (otherwise) {
    b->begin_else(loc);
    otherwise();
  }
  b->end_cond(loc);
}

void Tracer::stop(CallSite site) { rec_->builder(site.loc())->stop(site.loc()); }

Proxy Tracer::result(CallSite site) {
  auto b = rec_->builder(site.loc());
  return Proxy(b, b->get("result", dsl::StepSpec::fixed(0), site.loc()));
}

CacheHandle Tracer::cache(const std::vector<std::string>& modules, CallSite site) {
  const SourceLoc loc = site.loc();
  auto& inv = rec_->invoke(loc);
  if (!inv.has_prompt) throw TraceError(loc.str() + ": tracer.cache() needs an invoke with a prompt");
  CacheHandle h;
  h.prefix = "cache" + std::to_string(rec_->next_cache_id()) + ":";
  auto b = std::make_shared<dsl::GraphBuilder>(rec_->trace_id(), inv.builder->invoke());
  // Recorded in the order the model runs them, whatever order they were given in.
  std::vector<std::string> ordered = modules;
  std::stable_sort(ordered.begin(), ordered.end(), [&](const std::string& a, const std::string& b2) {
    return rec_->structure().order_of(ProviderKey::of_module(a, KeyKind::ModuleOutput)) <
           rec_->structure().order_of(ProviderKey::of_module(b2, KeyKind::ModuleOutput));
  });
  b->begin_iter(dsl::IterRange::all_from(0), loc);
  for (const auto& path : ordered) {
    const auto* info = rec_->structure().find_module(path);
    if (!info)
      throw TraceError(loc.str() + ": unknown module path '" + path + "' (did you mean '" +
                       rec_->structure().closest_path(path) + "'?)");
    dsl::NodeId v = b->get(path + ".output", dsl::StepSpec::iter(0), loc);
    if (info->output_tuple_size > 0) {
      const dsl::NodeId idx = b->constant(dsl::Value::integer(0), loc);
      v = b->op("getitem", {v, idx}, loc);
    }
    b->save(v, h.prefix + path, dsl::SaveMode::Append, loc);
    h.modules.push_back(path);
  }
  b->end_iter(loc);
  inv.auxiliary.push_back(std::move(b));
  return h;
}

}  // namespace nnsight
