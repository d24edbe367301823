#include "front/remote/remote_model.h"

#include <atomic>
#include <future>
#include <thread>

#include <nnsight/error.hpp>

#include "dsl/base64.h"
#include "front/remote/sampling_params_json.h"
#include "front/trace_client/interrupt.h"
#include "front/trace_client/trace_result_file.h"

namespace nnsight::remote {

nlohmann::json RemoteModel::call(const std::string& method, const std::string& target,
                                 const nlohmann::json& body) const {
  HttpResult r = http_->request(method, target, body.is_null() ? "" : body.dump());
  if (r.status < 200 || r.status >= 300) throw Error("nnsight server " + http_->url() + ": " + error_message(r));
  try {
    return nlohmann::json::parse(r.body);
  } catch (const nlohmann::json::exception& e) {
    throw Error("nnsight server " + http_->url() + ": " + target + " answered with malformed JSON: " + e.what());
  }
}

RemoteModel::RemoteModel(const std::string& url, const std::string& api_key, const std::string& model) {
  std::string key = api_key;
  if (key.empty())
    if (const char* env = std::getenv("NNSIGHT_API_KEY")) key = env;
  http_ = std::make_shared<HttpClient>(url, key);
  const nlohmann::json models = call("GET", "/v1/models", nullptr);
  if (!models.contains("data") || models["data"].empty()) throw Error("nnsight server " + url + " serves no model");
  for (const auto& m : models["data"])
    if (m.value("id", "") == model) model_ = model;
  if (model_.empty()) {
    if (!model.empty() && model != "smollm2-135m")
      throw Error("nnsight server " + url + " does not serve '" + model + "' (it serves '" +
                  models["data"][0].value("id", "") + "')");
    model_ = models["data"][0].value("id", "");
  }
  const nlohmann::json s = call("GET", "/v1/models/" + model_ + "/structure", nullptr);
  structure_ = runner::ModelStructure::from_json(s, "the structure of '" + model_ + "' from " + url);
  config_ = s.value("config", nlohmann::json::object());
}

TraceFuture RemoteModel::submit(const std::vector<runner::RequestInput>& requests) {
  nlohmann::json invokes = nlohmann::json::array();
  for (const auto& r : requests) {
    nlohmann::json inv = {{"sampling_params", sampling_params_to_json(r.params)},
                          {"invoke_index", r.params.invoke_index()},
                          {"payload", dsl::base64_encode(r.params.payload())}};
    if (r.prompt_token_ids.empty())
      inv["prompt"] = r.prompt;
    else
      inv["prompt_token_ids"] = r.prompt_token_ids;
    invokes.push_back(std::move(inv));
  }
  // Static errors the server finds come back here, before the future exists.
  const nlohmann::json created = call("POST", "/v1/traces", {{"model", model_}, {"invokes", invokes}});
  const std::string id = created.value("id", "");
  if (id.empty()) throw Error("nnsight server " + http_->url() + ": POST /v1/traces gave no trace id");
  std::shared_ptr<HttpClient> http = http_;
  std::future<TraceResult> fut = std::async(std::launch::async, [http, id] {
    HttpResult r = http->request("GET", "/v1/traces/" + id + "/saves?wait=1");
    if (r.status != 200) throw TraceError(error_message(r));
    return tracing::decode_trace_result(std::move(r.body), "the saves of trace " + id);
  });
  return TraceFuture(
      std::move(fut),
      [http, id] {
        try {
          http->request("DELETE", "/v1/traces/" + id);
        } catch (const Error&) {
        }
      },
      tracing::interrupt_count());
}

std::vector<int32_t> RemoteModel::encode(const std::string& text, bool add_special_tokens) const {
  const nlohmann::json r =
      call("POST", "/v1/tokenize", {{"model", model_}, {"prompt", text}, {"add_special_tokens", add_special_tokens}});
  return r.at("tokens").get<std::vector<int32_t>>();
}

std::string RemoteModel::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const nlohmann::json r = call("POST", "/v1/detokenize",
                                {{"model", model_}, {"tokens", ids}, {"skip_special_tokens", skip_special_tokens}});
  return r.at("prompt").get<std::string>();
}

}  // namespace nnsight::remote
