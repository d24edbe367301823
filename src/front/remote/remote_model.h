// RemoteModel: a model served by `nnsight serve`, as LanguageModel sees it
// when EngineArgs::remote() is set. It reads the server's model structure
// once (so traces are checked here, at the user's line, before they travel),
// sends recorded traces as data (POST /v1/traces with each request's binary
// payload), waits for their saves (GET /v1/traces/{id}/saves?wait=1) and
// turns them back into a TraceResult. Any thread may submit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <nnsight/language_model.hpp>

#include "front/remote/http_client.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::remote {

class RemoteModel {
 public:
  // Throws nnsight::Error when the server cannot be reached, refuses the key
  // or does not serve `model` (an empty name or the default one takes the
  // server's first model).
  RemoteModel(const std::string& url, const std::string& api_key, const std::string& model);

  const runner::ModelStructure& structure() const { return structure_; }
  // The served model's hyper-parameters, as /v1/models/{name}/structure gives them.
  const nlohmann::json& config() const { return config_; }
  const std::string& model_name() const { return model_; }

  // Sends the trace's requests (recorded, with their payloads); the future is
  // fulfilled with the saves, or with the server's error as a TraceError.
  TraceFuture submit(const std::vector<runner::RequestInput>& requests);

  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;

 private:
  nlohmann::json call(const std::string& method, const std::string& target, const nlohmann::json& body) const;

  std::shared_ptr<HttpClient> http_;
  std::string model_;
  runner::ModelStructure structure_;
  nlohmann::json config_;
};

}  // namespace nnsight::remote
