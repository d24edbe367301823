// TraceBackend: where a LanguageModel's traces run. The client room records a
// trace body into requests (TraceRecorder); a backend submits them and hands
// back one TraceFuture: LocalTraceBackend to an engine in this process,
// RemoteTraceBackend to an `nnsight serve` server. Everything else a
// LanguageModel asks of its model (structure, config, tokenizer, weights)
// goes through the same interface, so no caller asks which one it has.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include <nnsight/language_model.hpp>
#include <nnsight/llm.hpp>

#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::tracing {

class TraceBackend {
 public:
  virtual ~TraceBackend() = default;

  // The served model's modules and event order (for recording and static checks).
  virtual const runner::ModelStructure& structure() const = 0;
  // Submits a recorded trace's requests as one group.
  virtual TraceFuture submit(std::vector<runner::RequestInput> requests) = 0;
  virtual ModelConfigInfo config() const = 0;
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;
  // A weight of the model, read from its file in this process.
  virtual at::Tensor parameter(const std::string& name) const = 0;
  // The engine in this process; throws nnsight::Error where there is none.
  virtual LLM& llm() = 0;
};

}  // namespace nnsight::tracing
