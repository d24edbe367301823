#include "front/trace_client/local_trace_backend.h"

#include <atomic>
#include <future>

#include <nnsight/error.hpp>
#include <nnsight/llm.hpp>

#include "core/model_path.h"
#include "front/remote/model_config_json.h"
#include "front/trace_client/collect_trace_result.h"
#include "front/trace_client/interrupt.h"
#include "runner/engine/llm_access.h"

namespace nnsight::tracing {

TraceFuture submit_trace(runner::AsyncEngine& engine, std::vector<runner::RequestInput> requests,
                         std::vector<size_t> output_order) {
  const uint64_t submitted_at = interrupt_count();
  auto promise = std::make_shared<std::promise<TraceResult>>();
  std::future<TraceResult> future = promise->get_future();
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto on_done = [promise, cancelled, order = std::move(output_order)](std::vector<RequestOutput> outputs,
                                                                       std::exception_ptr error) {
    if (error) return promise->set_exception(error);
    try {
      if (cancelled->load())
        for (const auto& o : outputs)
          if (o.finish_reason == FinishReason::kAbort || o.finish_reason == FinishReason::kError)
            throw TraceError("the trace was cancelled before it finished");
      if (!order.empty()) {
        std::vector<RequestOutput> arranged(outputs.size());
        for (size_t r = 0; r < outputs.size(); ++r) arranged[order[r]] = std::move(outputs[r]);
        outputs = std::move(arranged);
      }
      promise->set_value(collect_trace_result(std::move(outputs)));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  };
  auto handles = engine.submit_group(std::move(requests), {}, std::move(on_done));
  std::vector<uint64_t> ids;
  for (const auto& h : handles) ids.push_back(h.id);
  return TraceFuture(
      std::move(future),
      [&engine, ids, cancelled] {
        cancelled->store(true);
        for (uint64_t id : ids) engine.abort(id);
      },
      submitted_at);
}

LocalTraceBackend::LocalTraceBackend(const EngineArgs& args) : args_(args), llm_(std::make_unique<LLM>(args)) {}

const runner::ModelStructure& LocalTraceBackend::structure() const {
  return runner::LLMAccess::engine(*llm_).model_structure();
}

TraceFuture LocalTraceBackend::submit(std::vector<runner::RequestInput> requests) {
  return submit_trace(runner::LLMAccess::engine(*llm_), std::move(requests));
}

ModelConfigInfo LocalTraceBackend::config() const {
  return remote::config_info(runner::LLMAccess::engine(*llm_).model_config());
}

std::vector<int32_t> LocalTraceBackend::encode(const std::string& text, bool add_special_tokens) const {
  return llm_->encode(text, add_special_tokens);
}

std::string LocalTraceBackend::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return llm_->decode(ids, skip_special_tokens);
}

at::Tensor LocalTraceBackend::parameter(const std::string& name) const {
  std::lock_guard<std::mutex> lock(weights_mu_);
  if (!weights_) weights_ = open_weights(resolve_model_path(args_.model()));
  const WeightSource& w = *weights_;
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

}  // namespace nnsight::tracing
