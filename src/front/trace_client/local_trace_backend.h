// LocalTraceBackend: traces run on an engine in this process (through
// submit_trace, as `nnsight trace` and the server submit theirs).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nnsight/engine_args.hpp>

#include "core/weight_source.h"
#include "front/trace_client/trace_backend.h"
#include "runner/engine/async_engine.h"

namespace nnsight::tracing {

class LocalTraceBackend final : public TraceBackend {
 public:
  explicit LocalTraceBackend(const EngineArgs& args);

  const runner::ModelStructure& structure() const override;
  TraceFuture submit(std::vector<runner::RequestInput> requests) override;
  ModelConfigInfo config() const override;
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  at::Tensor parameter(const std::string& name) const override;
  LLM& llm() override { return *llm_; }

 private:
  EngineArgs args_;
  std::unique_ptr<LLM> llm_;
  // The model file opened in this process for parameter(); opened on first use.
  mutable std::mutex weights_mu_;
  mutable std::unique_ptr<WeightSource> weights_;
};

}  // namespace nnsight::tracing
