// The OpenAI-compatible endpoints: POST /v1/completions and
// /v1/chat/completions, whole or streamed as server-sent events, on the
// least loaded replica. Forward hooks and activation capture configured for
// the engine apply to these requests as to `nnsight generate`. Fields the
// engine does not implement are refused with 400 naming the field (a client
// must not get silently different sampling).
#pragma once

#include <atomic>
#include <string>

#include "server/http_server.h"
#include "server/replica_set.h"
#include "server/serve_options.h"
#include "server/tenant_limits.h"

namespace nnsight::server {

class OpenAiApi {
 public:
  OpenAiApi(ReplicaSet& replicas, TenantLimits& limits, const ServeOptions& options);

  void completions(const std::string& tenant, const HttpRequest& req, HttpResponder& out);
  void chat_completions(const std::string& tenant, const HttpRequest& req, HttpResponder& out);
  // Running requests end now with an error answer (503; a stream with an
  // error event and [DONE]); the server is stopping.
  void shut_down();

 private:
  struct Prompt {
    std::string text;  // used when ids is empty
    std::vector<int32_t> ids;
  };
  enum class Kind { kCompletion, kChat };
  void run(const std::string& tenant, Kind kind, const std::vector<Prompt>& prompts, const SamplingParams& params,
           bool stream, bool include_usage, HttpResponder& out);

  ReplicaSet& replicas_;
  TenantLimits& limits_;
  std::string model_name_;
  std::atomic<bool> stopping_{false};
};

}  // namespace nnsight::server
