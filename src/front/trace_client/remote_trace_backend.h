// RemoteTraceBackend: traces run on an `nnsight serve` server
// (EngineArgs::remote); the requests travel as data (front/remote).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nnsight/engine_args.hpp>

#include "front/remote/remote_model.h"
#include "front/trace_client/trace_backend.h"

namespace nnsight::tracing {

class RemoteTraceBackend final : public TraceBackend {
 public:
  explicit RemoteTraceBackend(const EngineArgs& args);

  const runner::ModelStructure& structure() const override { return remote_.structure(); }
  TraceFuture submit(std::vector<runner::RequestInput> requests) override { return remote_.submit(requests); }
  ModelConfigInfo config() const override;
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override {
    return remote_.encode(text, add_special_tokens);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    return remote_.decode(ids, skip_special_tokens);
  }
  // Throws: the model's file is on the server.
  at::Tensor parameter(const std::string& name) const override;
  // Throws: the engine is on the server.
  LLM& llm() override;

 private:
  std::string url_;
  remote::RemoteModel remote_;
};

}  // namespace nnsight::tracing
