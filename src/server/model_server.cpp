#include "server/model_server.h"

#include <absl/strings/match.h>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "core/log.h"
#include "front/remote/json_integer.h"
#include "front/remote/model_config_json.h"
#include "server/api_keys.h"
#include "server/edit_registry.h"
#include "server/http_error.h"
#include "server/http_server.h"
#include "server/json_body.h"
#include "server/openai_api.h"
#include "server/replica_set.h"
#include "server/tenant_limits.h"
#include "server/trace_service.h"

namespace nnsight::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

HttpResponse json_ok(const json& j, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = dump(j);
  return r;
}

}  // namespace

struct ModelServer::Impl {
  ServeOptions options;
  ApiKeys keys;
  std::unique_ptr<ReplicaSet> replicas;
  std::unique_ptr<TenantLimits> limits;
  std::unique_ptr<EditRegistry> edits;
  std::unique_ptr<TraceService> traces;
  std::unique_ptr<OpenAiApi> openai;
  std::unique_ptr<HttpServer> http;
  std::string model_name;

  std::optional<HttpResponse> precheck(const HttpRequest& req) {
    if (req.path == "/health") return std::nullopt;
    if (!keys.tenant(req.header("authorization")))
      return json_error(401, req.header("authorization").empty()
                                 ? "this server needs an API key: send 'Authorization: Bearer <key>'"
                                 : "the API key is not valid");
    return std::nullopt;
  }

  void handle(const HttpRequest& req, HttpResponder& out) {
    try {
      route(req, out);
    } catch (const HttpError& e) {
      out.send(json_error(e.status(), e.what()));
    } catch (const ConfigError& e) {
      out.send(json_error(400, e.what()));
    } catch (const TraceError& e) {
      out.send(json_error(400, e.what()));
    } catch (const json::exception& e) {  // a field of the client's JSON of the wrong type or shape
      out.send(json_error(400, "malformed request: " + json_error_text(e)));
    }
  }

  void route(const HttpRequest& req, HttpResponder& out) {
    const std::string& p = req.path;
    const std::string tenant = keys.tenant(req.header("authorization")).value_or("");
    if (p == "/health") {
      require(req, "GET");
      if (http->stopping()) throw HttpError(503, "the server is shutting down");
      return out.send(json_ok({{"status", "ok"}}));
    }
    if (p == "/v1/models") {
      require(req, "GET");
      return out.send(json_ok({{"object", "list"},
                               {"data",
                                {{{"id", model_name},
                                  {"object", "model"},
                                  {"created", 0},
                                  {"owned_by", "nnsight"},
                                  {"replicas", replicas->size()}}}}}));
    }
    if (absl::StartsWith(p, "/v1/models/")) {
      require(req, "GET");
      const std::string rest = p.substr(11);
      const std::string name = rest.substr(0, rest.rfind('/'));
      if (rest.size() < 10 || rest.compare(rest.size() - 10, 10, "/structure") != 0)
        throw HttpError(404, "no such endpoint: " + p);
      if (name != model_name)
        throw HttpError(404, "the model '" + name + "' is not served here ('" + model_name + "' is)");
      json s = replicas->structure().to_json();
      s["model"] = model_name;
      s["config"] = remote::config_info_to_json(remote::config_info(replicas->model_config()));
      return out.send(json_ok(s));
    }
    if (p == "/v1/tokenize") {
      require(req, "POST");
      const json b = parse_json_body(req.body);
      if (!b.contains("prompt")) throw HttpError(400, "'prompt' is required");
      const std::string text = string_field(b, "prompt", "");
      return out.send(json_ok({{"tokens", replicas->first().encode(text, bool_field(b, "add_special_tokens", true))}}));
    }
    if (p == "/v1/detokenize") {
      require(req, "POST");
      const json b = parse_json_body(req.body);
      if (!b.contains("tokens")) throw HttpError(400, "'tokens' is required: a list of token ids");
      // Checked whole before narrowing: 4294967296 is not token 0.
      const int64_t vocab = replicas->model_config().vocab_size;
      const std::vector<int64_t> wide = remote::json_integers<int64_t>(b["tokens"], "tokens");
      std::vector<int32_t> ids;
      for (size_t i = 0; i < wide.size(); ++i) {
        if (wide[i] < 0 || wide[i] >= vocab)
          throw HttpError(400, "tokens[" + std::to_string(i) + "]: token id " + std::to_string(wide[i]) +
                                   " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        ids.push_back(static_cast<int32_t>(wide[i]));
      }
      return out.send(
          json_ok({{"prompt", replicas->first().decode(ids, bool_field(b, "skip_special_tokens", false))}}));
    }
    if (p == "/v1/completions") {
      require(req, "POST");
      return openai->completions(tenant, req, out);
    }
    if (p == "/v1/chat/completions") {
      require(req, "POST");
      return openai->chat_completions(tenant, req, out);
    }
    if (p == "/v1/edits" && req.method == "GET") return out.send(json_ok(edits->list(tenant)));
    if (p == "/v1/edits") {
      require(req, "POST");
      return out.send(json_ok(edits->add(tenant, parse_json_body(req.body)), 201));
    }
    if (absl::StartsWith(p, "/v1/edits/")) {
      const std::string name = p.substr(10);
      if (req.method == "DELETE") {
        edits->remove(tenant, name);
        return out.send(json_ok({{"id", name}, {"object", "edit"}, {"deleted", true}}));
      }
      require(req, "GET");
      return out.send(json_ok(edits->describe(tenant, name)));
    }
    if (p == "/v1/scan") {
      require(req, "POST");
      return out.send(json_ok(traces->scan(tenant, parse_json_body(req.body))));
    }
    if (p == "/v1/traces" && req.method == "GET") return out.send(json_ok(traces->list(tenant)));
    if (p == "/v1/traces") {
      require(req, "POST");
      const std::string id = traces->submit(tenant, parse_json_body(req.body));
      if (wants_wait(req)) return send_saves(tenant, id, out);
      return out.send(json_ok(traces->status(tenant, id), 202));
    }
    if (absl::StartsWith(p, "/v1/traces/")) {
      std::string rest = p.substr(11);
      if (rest.size() > 6 && rest.compare(rest.size() - 6, 6, "/saves") == 0) {
        require(req, "GET");
        return send_saves(tenant, rest.substr(0, rest.size() - 6), out, wants_wait(req));
      }
      if (req.method == "DELETE") {
        traces->cancel(tenant, rest);
        return out.send(json_ok(traces->status(tenant, rest)));
      }
      require(req, "GET");
      return out.send(json_ok(traces->status(tenant, rest)));
    }
    throw HttpError(404, "no such endpoint: " + req.method + " " + p);
  }

  static bool wants_wait(const HttpRequest& req) {
    auto it = req.query.find("wait");
    return it != req.query.end() && it->second != "0" && it->second != "false";
  }

  // HEAD is GET without the body (RFC 9110 9.3.2; the HTTP layer leaves the body out).
  static void require(const HttpRequest& req, const char* method) {
    if (req.method == method || (req.method == "HEAD" && std::string(method) == "GET")) return;
    throw HttpError(405, req.path + " takes " + method + ", not " + req.method);
  }

  void send_saves(const std::string& tenant, const std::string& id, HttpResponder& out, bool wait = true) {
    std::string bytes = traces->saves(tenant, id, wait, [&out] { return out.client_gone(); });
    HttpResponse r;
    r.content_type = "application/octet-stream";
    r.body = std::move(bytes);
    r.headers.emplace_back("X-Trace-Id", id);
    out.send(std::move(r));
  }
};

ModelServer::ModelServer(ServeOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  if (!s.options.api_keys_file.empty())
    s.keys = ApiKeys::load(s.options.api_keys_file);
  else
    log_warning("serve: no --api-keys file: every client is the tenant 'anonymous' (fine on a machine of your own)");
  s.model_name = s.options.served_model_name.empty() ? s.options.engine.model() : s.options.served_model_name;
  s.options.served_model_name = s.model_name;
  s.replicas = std::make_unique<ReplicaSet>(s.options);
  s.limits = std::make_unique<TenantLimits>(s.options.limits);
  s.edits = std::make_unique<EditRegistry>(s.replicas->structure(), dsl::Limits());
  s.traces = std::make_unique<TraceService>(*s.replicas, *s.limits, s.options, s.edits.get());
  s.openai = std::make_unique<OpenAiApi>(*s.replicas, *s.limits, s.options);
  HttpServerOptions h;
  h.host = s.options.host;
  h.port = s.options.port;
  h.max_body_bytes = s.options.max_body_bytes;
  h.max_connections = s.options.max_connections;
  h.max_connections_per_address = s.options.max_connections_per_address;
  h.head_timeout_s = s.options.head_timeout_s;
  h.read_timeout_s = s.options.read_timeout_s;
  h.shutdown_grace_s = s.options.shutdown_grace_s;
  s.http = std::make_unique<HttpServer>(
      h, [&s](const HttpRequest& r) { return s.precheck(r); },
      [&s](const HttpRequest& r, HttpResponder& out) { s.handle(r, out); });
  s.http->start();
}

ModelServer::~ModelServer() { stop(); }

int ModelServer::port() const { return impl_->http->port(); }

void ModelServer::stop() {
  if (!impl_->http) return;
  // Running requests end with an error answer (a stream with an error event
  // and [DONE]) before the connections close.
  impl_->openai->shut_down();
  impl_->traces->shut_down();
  impl_->http->stop();
  impl_->traces.reset();
  impl_->openai.reset();
  impl_->http.reset();
}

}  // namespace nnsight::server
