#include "server/openai_api.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "core/tokenizer/chat_template.h"
#include "front/remote/sampling_params_json.h"
#include "runner/engine/async_engine.h"
#include "server/http_error.h"
#include "server/random_id.h"

namespace nnsight::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* finish_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    default:
      return nullptr;
  }
}

json parse_body(const HttpRequest& req) {
  try {
    json j = json::parse(req.body);
    if (!j.is_object()) throw HttpError(400, "the body must be a JSON object");
    return j;
  } catch (const json::exception& e) {
    throw HttpError(400, std::string("the body is not JSON: ") + e.what());
  }
}

// Splits the OpenAI fields the engine implements into SamplingParams; refuses
// the rest unless they hold their no-op value.
SamplingParams sampling_from(const json& body, const std::vector<std::string>& own_fields, bool chat) {
  json sp = json::object();
  static const char* sampling[] = {"temperature", "top_p", "top_k",          "min_p",      "seed",
                                   "max_tokens",  "stop",  "stop_token_ids", "ignore_eos", "skip_special_tokens"};
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    bool own = false;
    for (const auto& f : own_fields) own = own || f == k;
    if (own || k == "model" || k == "stream" || k == "stream_options" || k == "user") continue;
    bool is_sampling = false;
    for (const char* s : sampling) is_sampling = is_sampling || k == s;
    if (is_sampling) {
      sp[k] = v;
    } else if (k == "max_completion_tokens") {
      sp["max_tokens"] = v;
    } else if (k == "logprobs" && !chat) {
      if (!v.is_null()) sp["logprobs"] = v;
    } else if (k == "logprobs" && chat) {
      if (v.is_boolean() && v.get<bool>()) sp["logprobs"] = body.value("top_logprobs", 0);
    } else if (k == "top_logprobs" && chat) {
    } else if ((k == "n" || k == "best_of") && (v.is_null() || v == 1)) {
    } else if ((k == "presence_penalty" || k == "frequency_penalty") && (v.is_null() || v == 0)) {
    } else if ((k == "echo" || k == "logit_bias" || k == "suffix" || k == "tools" || k == "response_format") &&
               (v.is_null() || v == false || (v.is_object() && v.empty()) || (v.is_array() && v.empty()))) {
    } else {
      throw HttpError(400, "'" + k + "': not implemented by this engine" +
                               std::string(k == "n" || k == "best_of"               ? " (only 1)"
                                           : k.find("penalty") != std::string::npos ? " (only 0)"
                                                                                    : "") +
                               "; supported: temperature, top_p, top_k, min_p, seed, max_tokens, stop, "
                               "stop_token_ids, ignore_eos, logprobs, stream");
    }
  }
  SamplingParams base;  // OpenAI's defaults: 16 tokens, temperature 1
  try {
    return remote::sampling_params_from_json(sp, "request", base);
  } catch (const ConfigError& e) {
    throw HttpError(400, e.what());
  }
}

// A request's updates, handed from the engine's loop thread to the handler.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RequestOutput> updates;
};

}  // namespace

OpenAiApi::OpenAiApi(ReplicaSet& replicas, TenantLimits& limits, const ServeOptions& options)
    : replicas_(replicas),
      limits_(limits),
      model_name_(options.served_model_name.empty() ? options.engine.model() : options.served_model_name) {}

void OpenAiApi::completions(const std::string& tenant, const HttpRequest& req, HttpResponder& out) {
  const json body = parse_body(req);
  if (body.contains("model") && body["model"] != model_name_)
    throw HttpError(
        404, "the model '" + dump(body["model"]) + "' is not served here (this server serves '" + model_name_ + "')");
  if (!body.contains("prompt")) throw HttpError(400, "'prompt' is required");
  std::vector<Prompt> prompts;
  const json& p = body["prompt"];
  try {
    if (p.is_string()) {
      prompts.push_back({p.get<std::string>(), {}});
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      prompts.push_back({"", p.get<std::vector<int32_t>>()});
    } else if (p.is_array() && !p.empty()) {
      for (const auto& e : p) {
        if (e.is_string())
          prompts.push_back({e.get<std::string>(), {}});
        else
          prompts.push_back({"", e.get<std::vector<int32_t>>()});
      }
    }
  } catch (const json::exception&) {
    throw HttpError(400, "'prompt' must be a string, a list of strings, a list of token ids or a list of those");
  }
  if (prompts.empty() || prompts.size() > 256) throw HttpError(400, "'prompt' must hold 1 to 256 prompts");
  for (const auto& q : prompts)
    if (q.text.empty() && q.ids.empty()) throw HttpError(400, "'prompt' holds an empty prompt");
  SamplingParams params = sampling_from(body, {"prompt"}, false);
  const bool stream = body.value("stream", false);
  const bool usage = body.contains("stream_options") && body["stream_options"].is_object() &&
                     body["stream_options"].value("include_usage", false);
  run(tenant, Kind::kCompletion, prompts, params, stream, usage, out);
}

void OpenAiApi::chat_completions(const std::string& tenant, const HttpRequest& req, HttpResponder& out) {
  const json body = parse_body(req);
  if (body.contains("model") && body["model"] != model_name_)
    throw HttpError(
        404, "the model '" + dump(body["model"]) + "' is not served here (this server serves '" + model_name_ + "')");
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    throw HttpError(400, "'messages' must be a non-empty list");
  std::vector<ChatMessage> messages;
  for (const auto& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw HttpError(400, "each message needs a 'role' string");
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    const json& c = m.value("content", json());
    if (c.is_string()) {
      msg.content = c.get<std::string>();
    } else if (c.is_array()) {  // [{"type": "text", "text": ...}]
      for (const auto& part : c) {
        if (part.value("type", "") != "text")
          throw HttpError(400, "message content parts other than text are not supported");
        msg.content += part.value("text", "");
      }
    } else if (!c.is_null()) {
      throw HttpError(400, "a message's 'content' must be a string or a list of text parts");
    }
    messages.push_back(std::move(msg));
  }
  const auto& tok = replicas_.engine(0).tokenizer();
  if (!tok) throw HttpError(400, "the served model has no tokenizer, so it cannot chat");
  if (tok->chat_template().empty())
    throw HttpError(400,
                    "the served model has no chat template (tokenizer_config.json 'chat_template' or GGUF "
                    "'tokenizer.chat_template'); use /v1/completions");
  std::string text;
  try {
    ChatTemplate tmpl(tok->chat_template());
    text = tmpl.render(messages, true, tok->bos_token(), tok->eos_token());
  } catch (const ConfigError& e) {
    throw HttpError(400, e.what());
  }
  SamplingParams params = sampling_from(body, {"messages"}, true);
  const bool stream = body.value("stream", false);
  const bool usage = body.contains("stream_options") && body["stream_options"].is_object() &&
                     body["stream_options"].value("include_usage", false);
  // The template already holds the special tokens (BOS and the turn markers).
  std::vector<Prompt> prompts{{"", tok->encode(text, false)}};
  if (prompts[0].ids.empty()) throw HttpError(400, "the chat template rendered an empty prompt");
  run(tenant, Kind::kChat, prompts, params, stream, usage, out);
}

void OpenAiApi::run(const std::string& tenant, Kind kind, const std::vector<Prompt>& prompts,
                    const SamplingParams& params, bool stream, bool include_usage, HttpResponder& out) {
  const size_t replica = replicas_.acquire(static_cast<int64_t>(prompts.size()));
  struct Release {
    ReplicaSet& r;
    size_t i;
    int64_t n;
    ~Release() { r.release(i, n); }
  } release{replicas_, replica, static_cast<int64_t>(prompts.size())};
  LLM& llm = replicas_.llm(replica);
  int64_t tokens = 0;
  std::vector<std::vector<int32_t>> ids;
  for (const auto& p : prompts) {
    ids.push_back(p.ids.empty() ? llm.encode(p.text) : p.ids);
    tokens += static_cast<int64_t>(ids.back().size()) + params.max_tokens();
  }
  limits_.charge_tokens(tenant, tokens);

  const std::string id = random_id(kind == Kind::kChat ? "chatcmpl-" : "cmpl-");
  const int64_t created = unix_now();
  const char* object = kind == Kind::kChat ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  auto stream_state = std::make_shared<Stream>();
  std::vector<LLM::Handle> handles;
  try {
    for (size_t i = 0; i < ids.size(); ++i) {
      LLM::StreamCallback cb;
      if (stream)
        cb = [stream_state, i](const RequestOutput& o) {
          std::lock_guard<std::mutex> lock(stream_state->mu);
          stream_state->updates.push_back(o);
          stream_state->updates.back().request_id = i;  // index of its choice
          stream_state->cv.notify_one();
        };
      handles.push_back(llm.submit(ids[i], params, cb));
    }
  } catch (const ConfigError& e) {
    for (const auto& h : handles) llm.abort(h.id);
    throw HttpError(400, e.what());
  }
  auto abort_all = [&] {
    for (const auto& h : handles) llm.abort(h.id);
  };
  auto usage_json = [&](const std::vector<RequestOutput>& finals) {
    int64_t prompt_tokens = 0, completion_tokens = 0;
    for (size_t i = 0; i < finals.size(); ++i) {
      prompt_tokens += static_cast<int64_t>(ids[i].size());
      completion_tokens += static_cast<int64_t>(finals[i].token_ids.size());
    }
    return json{{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}};
  };
  auto logprobs_json = [&](const RequestOutput& o) -> json {
    if (!params.logprobs()) return nullptr;
    json tokens = json::array(), lps = json::array(), tops = json::array();
    for (const auto& lp : o.logprobs) {
      tokens.push_back(llm.decode({lp.token}));
      lps.push_back(lp.logprob);
      json top = json::object();
      for (const auto& [t, l] : lp.top) top[llm.decode({t})] = l;
      tops.push_back(top);
    }
    return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
  };

  if (!stream) {
    std::vector<RequestOutput> finals;
    for (const auto& h : handles) {
      while (h.result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
        if (out.client_gone()) {
          abort_all();
          return;  // nobody to answer
        }
      try {
        finals.push_back(h.result.get());
      } catch (const std::exception& e) {
        abort_all();
        throw HttpError(500, e.what());
      }
      if (!finals.back().error.empty()) {
        abort_all();
        throw HttpError(500, finals.back().error);
      }
    }
    json choices = json::array();
    for (size_t i = 0; i < finals.size(); ++i) {
      const char* fr = finish_name(finals[i].finish_reason);
      json c = {{"index", i}, {"finish_reason", fr ? json(fr) : json()}, {"logprobs", logprobs_json(finals[i])}};
      if (kind == Kind::kChat)
        c["message"] = {{"role", "assistant"}, {"content", finals[i].text}};
      else
        c["text"] = finals[i].text;
      choices.push_back(std::move(c));
    }
    HttpResponse r;
    r.body = dump({{"id", id},
                   {"object", object},
                   {"created", created},
                   {"model", model_name_},
                   {"choices", choices},
                   {"usage", usage_json(finals)}});
    out.send(std::move(r));
    return;
  }

  // Server-sent events: one chunk per update with the new text.
  if (!out.start_stream(200, "text/event-stream")) {
    abort_all();
    return;
  }
  auto chunk = [&](json choice) {
    return "data: " +
           dump({{"id", id}, {"object", object}, {"created", created}, {"model", model_name_}, {"choices", {choice}}}) +
           "\n\n";
  };
  std::vector<size_t> sent(handles.size(), 0);
  size_t hold_back = 0;
  for (const auto& stop : params.stop())
    if (!stop.empty()) hold_back = std::max(hold_back, stop.size() - 1);
  std::vector<RequestOutput> finals(handles.size());
  size_t done = 0;
  if (kind == Kind::kChat)
    for (size_t i = 0; i < handles.size(); ++i)
      if (!out.write(
              chunk({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}))) {
        abort_all();
        return;
      }
  while (done < handles.size()) {
    std::deque<RequestOutput> batch;
    {
      std::unique_lock<std::mutex> lock(stream_state->mu);
      stream_state->cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return !stream_state->updates.empty(); });
      batch.swap(stream_state->updates);
    }
    if (batch.empty() && out.client_gone()) {
      abort_all();
      return;
    }
    for (auto& o : batch) {
      const size_t i = o.request_id;
      if (o.finish_reason == FinishReason::kError) {
        out.write("data: " + dump({{"error", {{"message", o.error}, {"type", "server_error"}}}}) + "\n\n");
        abort_all();
        return;
      }
      // Until the request ends, the text's tail that could still become a
      // stop string (which the engine then cuts) is held back.
      const size_t ready = o.finished ? o.text.size() : o.text.size() - std::min(o.text.size(), hold_back);
      std::string delta = ready > sent[i] ? o.text.substr(sent[i], ready - sent[i]) : "";
      sent[i] = std::max(sent[i], ready);
      const char* fr = o.finished ? finish_name(o.finish_reason) : nullptr;
      if (!delta.empty() || o.finished) {
        json c = {{"index", i}, {"finish_reason", fr ? json(fr) : json()}};
        if (kind == Kind::kChat)
          c["delta"] = delta.empty() ? json::object() : json{{"content", delta}};
        else
          c["text"] = delta, c["logprobs"] = nullptr;
        if (!out.write(chunk(c))) {
          abort_all();
          return;
        }
      }
      if (o.finished) {
        finals[i] = std::move(o);
        ++done;
      }
    }
  }
  if (include_usage)
    out.write("data: " +
              dump({{"id", id},
                    {"object", object},
                    {"created", created},
                    {"model", model_name_},
                    {"choices", json::array()},
                    {"usage", usage_json(finals)}}) +
              "\n\n");
  out.write("data: [DONE]\n\n");
}

}  // namespace nnsight::server
