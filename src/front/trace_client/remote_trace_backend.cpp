#include "front/trace_client/remote_trace_backend.h"

#include <nnsight/error.hpp>

#include "front/remote/model_config_json.h"

namespace nnsight::tracing {

RemoteTraceBackend::RemoteTraceBackend(const EngineArgs& args)
    : url_(args.remote()), remote_(args.remote(), args.api_key(), args.model()) {}

ModelConfigInfo RemoteTraceBackend::config() const { return remote::config_info_from_json(remote_.config()); }

at::Tensor RemoteTraceBackend::parameter(const std::string& name) const {
  throw Error("parameter('" + name + "'): the model is served at " + url_ +
              " and its file is not in this process; run the module inside the trace instead (lm.envoy(path)(x))");
}

LLM& RemoteTraceBackend::llm() {
  throw Error("this LanguageModel runs on the server at " + url_ + "; it has no engine in this process");
}

}  // namespace nnsight::tracing
