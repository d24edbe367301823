#include "server/openai_api.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "core/tokenizer/chat_template.h"
#include "front/remote/json_integer.h"
#include "front/remote/sampling_params_json.h"
#include "runner/engine/engine_failure.h"
#include "runner/engine/async_engine.h"
#include "server/http_error.h"
#include "server/json_body.h"
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

json parse_body(const HttpRequest& req) { return parse_json_body(req.body); }

bool include_usage(const json& body) {
  auto it = body.find("stream_options");
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_object()) throw HttpError(400, "'stream_options' must be an object");
  return bool_field(*it, "include_usage", false);
}

// The HTTP status of a request the engine refused or failed: what the
// client asked for that can never run (a prompt longer than max_model_len)
// is a 400; the engine failing under it (a worker died) is the server's.
int status_of(const std::exception& e) { return dynamic_cast<const ConfigError*>(&e) ? 400 : 500; }

std::string error_event(const std::string& message, int code) {
  return "data: " +
         dump({{"error",
                {{"message", message},
                 {"type", code >= 500 ? "server_error" : "invalid_request_error"},
                 {"code", code}}}}) +
         "\n\n";
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

void OpenAiApi::shut_down() { stopping_ = true; }

void OpenAiApi::completions(const std::string& tenant, const HttpRequest& req, HttpResponder& out) {
  const json body = parse_body(req);
  if (body.contains("model") && body["model"] != model_name_)
    throw HttpError(
        404, "the model '" + dump(body["model"]) + "' is not served here (this server serves '" + model_name_ + "')");
  if (!body.contains("prompt")) throw HttpError(400, "'prompt' is required");
  std::vector<Prompt> prompts;
  const json& p = body["prompt"];
  const int64_t vocab = replicas_.model_config().vocab_size;
  // Token ids are checked whole before they are narrowed: 4294967297 is not token 1.
  auto token_ids = [&](const json& list, const std::string& field) {
    std::vector<int32_t> ids;
    try {
      for (int64_t t : remote::json_integers<int64_t>(list, field)) {
        if (t < 0 || t >= vocab)
          throw HttpError(400, field + "[" + std::to_string(ids.size()) + "]: token id " + std::to_string(t) +
                                   " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        ids.push_back(static_cast<int32_t>(t));
      }
    } catch (const ConfigError& e) {
      throw HttpError(400, e.what());
    }
    return ids;
  };
  if (p.is_string()) {
    prompts.push_back({p.get<std::string>(), {}});
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    prompts.push_back({"", token_ids(p, "prompt")});
  } else if (p.is_array() && !p.empty()) {
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].is_string())
        prompts.push_back({p[i].get<std::string>(), {}});
      else if (p[i].is_array())
        prompts.push_back({"", token_ids(p[i], "prompt[" + std::to_string(i) + "]")});
      else
        throw HttpError(400, "'prompt' must be a string, a list of strings, a list of token ids or a list of those");
    }
  } else if (!p.is_array()) {
    throw HttpError(400, "'prompt' must be a string, a list of strings, a list of token ids or a list of those");
  }
  if (prompts.empty() || prompts.size() > 256) throw HttpError(400, "'prompt' must hold 1 to 256 prompts");
  for (const auto& q : prompts)
    if (q.text.empty() && q.ids.empty()) throw HttpError(400, "'prompt' holds an empty prompt");
  SamplingParams params = sampling_from(body, {"prompt"}, false);
  const bool stream = bool_field(body, "stream", false);
  const bool usage = include_usage(body);
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
  const bool stream = bool_field(body, "stream", false);
  const bool usage = include_usage(body);
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

  const std::string stopping_message = "the server is shutting down; the request was cancelled";
  auto stopping = [&] { return stopping_ || out.server_stopping(); };
  // A request the engine refused (its exception) or that failed: the answer.
  auto failure = [&](const LLM::Handle& h) -> std::optional<HttpError> {
    if (h.result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
    try {
      const RequestOutput& o = h.result.get();
      if (o.finish_reason != FinishReason::kError) return std::nullopt;
      // No intervention runs here: an error is the engine's.
      return HttpError(runner::is_engine_failure(o.error) ? 503 : 500, o.error);
    } catch (const std::exception& e) {
      return HttpError(status_of(e), e.what());
    }
  };

  if (!stream) {
    std::vector<RequestOutput> finals;
    for (const auto& h : handles) {
      while (h.result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
        if (stopping()) {
          abort_all();
          throw HttpError(503, stopping_message);
        }
        if (out.client_gone()) {
          abort_all();
          return;  // nobody to answer
        }
      }
      if (auto e = failure(h)) {
        abort_all();
        throw *e;
      }
      finals.push_back(h.result.get());
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

  // Server-sent events: one chunk per update with the new text. The status
  // goes out with the first update, so a request the engine refuses (a
  // prompt longer than max_model_len) still gets its 4xx.
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(stream_state->mu);
      if (stream_state->cv.wait_for(lock, std::chrono::milliseconds(50),
                                    [&] { return !stream_state->updates.empty(); }))
        break;
    }
    for (const auto& h : handles)
      if (auto e = failure(h)) {
        abort_all();
        throw *e;
      }
    if (stopping()) {
      abort_all();
      throw HttpError(503, stopping_message);
    }
    if (out.client_gone()) {
      abort_all();
      return;
    }
  }
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
    // A request the engine refused after the stream began, or a shutdown (also
    // while tokens keep coming): an error event, then the end of the stream.
    std::optional<HttpError> e;
    if (batch.empty())
      for (size_t i = 0; i < handles.size() && !e; ++i) e = failure(handles[i]);
    if (!e && stopping()) e = HttpError(503, stopping_message);
    if (e) {
      abort_all();
      out.write(error_event(e->what(), e->status()));
      out.write("data: [DONE]\n\n");
      return;
    }
    if (batch.empty() && out.client_gone()) {
      abort_all();
      return;
    }
    for (auto& o : batch) {
      const size_t i = o.request_id;
      if (o.finish_reason == FinishReason::kError) {
        out.write(error_event(o.error, runner::is_engine_failure(o.error) ? 503 : 500));
        out.write("data: [DONE]\n\n");
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
