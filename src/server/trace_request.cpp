#include "server/trace_request.h"

#include <nnsight/error.hpp>

#include "dsl/errors.h"
#include "dsl/base64.h"
#include "front/remote/json_integer.h"
#include "front/remote/sampling_params_json.h"
#include "front/trace_client/graph_file.h"
#include "front/trace_client/graph_trace.h"
#include "front/trace_worker/recorded_trace.h"
#include "server/http_error.h"
#include "server/json_body.h"

namespace nnsight::server {
namespace {

constexpr size_t kMaxRequests = 1024;

// A graph given as a JSON value, written with node k on line k + 1, so a
// message's "graphs[i]:L" names node L - 1.
std::string node_per_line(const nlohmann::json& g) {
  if (!g.is_object() || !g.contains("nodes") || !g["nodes"].is_array()) return g.dump();
  std::string text = "{\"nodes\": [";
  for (size_t k = 0; k < g["nodes"].size(); ++k) text += (k ? ",\n" : "") + g["nodes"][k].dump();
  text += "]";
  for (auto it = g.begin(); it != g.end(); ++it)
    if (it.key() != "nodes") text += ", " + nlohmann::json(it.key()).dump() + ": " + it.value().dump();
  return text + "}";
}

void take_prompt(const nlohmann::json& j, const std::string& where, runner::RequestInput& in) {
  if (j.contains("prompt_token_ids")) {
    in.prompt_token_ids = remote::json_integers<int32_t>(j["prompt_token_ids"], where + ".prompt_token_ids", 0);
    if (in.prompt_token_ids.empty()) throw HttpError(400, where + ".prompt_token_ids is empty");
  } else if (j.contains("prompt")) {
    in.prompt = j["prompt"].get<std::string>();
  } else {
    throw HttpError(400, where + ": give \"prompt\" or \"prompt_token_ids\"");
  }
}

TraceRequest parse(const nlohmann::json& body, const runner::ModelStructure& structure, const dsl::Limits& limits,
                   uint64_t trace_id, const std::vector<dsl::Graph>& edits) {
  if (!body.is_object()) throw HttpError(400, "the body must be a JSON object");
  for (auto it = body.begin(); it != body.end(); ++it) {
    static const char* known[] = {"model",  "prompts",     "prompt_token_ids", "sampling_params",
                                  "graphs", "graph_names", "invokes",          "edits"};
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) throw HttpError(400, "unknown field '" + it.key() + "' in the trace request (docs/server.md)");
  }
  TraceRequest out;
  if (body.contains("invokes")) {
    const auto& invokes = body["invokes"];
    if (!invokes.is_array() || invokes.empty() || invokes.size() > kMaxRequests)
      throw HttpError(400, "\"invokes\" must be a list of 1 to " + std::to_string(kMaxRequests) + " requests");
    std::vector<runner::RequestInput> requests;
    for (size_t i = 0; i < invokes.size(); ++i) {
      const std::string where = "invokes[" + std::to_string(i) + "]";
      const auto& inv = invokes[i];
      runner::RequestInput in;
      take_prompt(inv, where, in);
      in.params =
          remote::sampling_params_from_json(inv.value("sampling_params", nlohmann::json()), where + ".sampling_params");
      in.params.invoke_index(inv.contains("invoke_index")
                                 ? remote::json_integer<int32_t>(inv["invoke_index"], where + ".invoke_index", 0)
                                 : static_cast<int32_t>(i));
      in.params.payload(dsl::base64_decode(inv.value("payload", std::string()), where + ".payload"));
      out.prompts.push_back(in.prompt);
      out.prompt_of.push_back(i);
      out.max_tokens += in.params.max_tokens();
      requests.push_back(std::move(in));
    }
    out.requests = tracing::prepare_recorded_trace(structure, std::move(requests), limits, trace_id, edits);
    return out;
  }

  std::vector<runner::RequestInput> prompts;
  if (body.contains("prompt_token_ids")) {
    if (!body["prompt_token_ids"].is_array()) throw HttpError(400, "\"prompt_token_ids\" must be a list of lists");
    for (const auto& ids : body["prompt_token_ids"]) {
      runner::RequestInput in;
      in.prompt_token_ids =
          remote::json_integers<int32_t>(ids, "prompt_token_ids[" + std::to_string(prompts.size()) + "]", 0);
      if (in.prompt_token_ids.empty())
        throw HttpError(400, "prompt_token_ids[" + std::to_string(prompts.size()) + "] is empty");
      prompts.push_back(std::move(in));
    }
  } else if (body.contains("prompts")) {
    for (const auto& p : body["prompts"]) {
      runner::RequestInput in;
      in.prompt = p.get<std::string>();
      prompts.push_back(std::move(in));
    }
  }
  if (prompts.empty() || prompts.size() > kMaxRequests)
    throw HttpError(400, "give 1 to " + std::to_string(kMaxRequests) + " \"prompts\" (or \"prompt_token_ids\")");
  if (!body.contains("graphs") || !body["graphs"].is_array() || body["graphs"].empty())
    throw HttpError(400, "give \"graphs\": a list of intervention graphs (docs/ir.md), or \"invokes\"");
  SamplingParams params;
  params.max_tokens(1).temperature(0);  // as `nnsight trace`
  params =
      remote::sampling_params_from_json(body.value("sampling_params", nlohmann::json()), "sampling_params", params);
  std::vector<tracing::GraphFile> graphs;
  const auto& names = body.value("graph_names", nlohmann::json::array());
  for (size_t i = 0; i < body["graphs"].size(); ++i) {
    const auto& g = body["graphs"][i];
    std::string name =
        i < names.size() && names[i].is_string() ? names[i].get<std::string>() : "graphs[" + std::to_string(i) + "]";
    const std::string text = g.is_string() ? g.get<std::string>() : node_per_line(g);
    graphs.push_back(tracing::parse_graph_file(name, text, limits));
    tracing::validate_graph_file(graphs.back(), limits);
  }
  for (const auto& p : prompts) out.prompts.push_back(p.prompt);
  out.max_tokens = params.max_tokens() * static_cast<int64_t>(prompts.size());
  tracing::PreparedGraphTrace prepared =
      tracing::prepare_graph_trace(structure, std::move(prompts), graphs, params, trace_id, edits);
  out.requests = std::move(prepared.requests);
  out.prompt_of = std::move(prepared.prompt_of);
  return out;
}

}  // namespace

TraceRequest parse_trace_request(const nlohmann::json& body, const runner::ModelStructure& structure,
                                 const dsl::Limits& limits, uint64_t trace_id, const std::vector<dsl::Graph>& edits) {
  try {
    return parse(body, structure, limits, trace_id, edits);
  } catch (const HttpError&) {
    throw;
  } catch (const nlohmann::json::exception& e) {
    throw HttpError(400, "malformed trace request: " + json_error_text(e));
  } catch (const std::exception& e) {  // TraceError, ConfigError, dsl::DecodeError: the checks' own messages
    throw HttpError(400, e.what());
  }
}

}  // namespace nnsight::server
