#include "front/trace_client/local_trace_backend.h"

#include <nnsight/error.hpp>
#include <nnsight/llm.hpp>

#include "core/model_path.h"
#include "front/remote/model_config_json.h"
#include "front/trace_client/submit_trace.h"
#include "runner/engine/llm_access.h"

namespace nnsight::tracing {

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
    for (const char* embed :
         {"model.embed_tokens.weight", "transformer.wte.weight", "model.language_model.embed_tokens.weight"})
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
