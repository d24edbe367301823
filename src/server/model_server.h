// ModelServer: `nnsight serve` as a library. It starts the replicas, then
// answers HTTP (docs/server.md):
//   GET  /health                          no key needed
//   GET  /v1/models                       OpenAI's list
//   GET  /v1/models/{name}/structure      module tree, event order, functions, config
//   POST /v1/tokenize, /v1/detokenize
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events)
//   POST /v1/traces[?wait=1]              a trace as data; with wait, its saves
//   GET  /v1/traces/{id}                  state and progress
//   GET  /v1/traces/{id}/saves[?wait=1]   safetensors
//   DELETE /v1/traces/{id}                cancel
// Every answer but /health needs "Authorization: Bearer <key>" when keys are
// configured (401 otherwise, decided before the body is read).
#pragma once

#include <memory>

#include "server/serve_options.h"

namespace nnsight::server {

class ModelServer {
 public:
  // Loads the model in every replica and starts listening. Throws what the
  // engine throws (a bad model file, options) and nnsight::Error when the
  // address cannot be bound.
  explicit ModelServer(ServeOptions options);
  ~ModelServer();  // stop()
  int port() const;
  // Stops listening, cancels running traces and stops the engines.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nnsight::server
