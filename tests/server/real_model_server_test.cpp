// nnsight serve on the default model, in this process on a free port: the
// OpenAI endpoint, traces as data, the remote LanguageModel, keys, limits and
// cancellation. (The official Python client is tested by
// tests/server/openai_client_test.py.)
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "front/remote/http_client.h"
#include "front/trace_client/graph_file.h"
#include "front/trace_client/graph_trace.h"
#include "front/trace_client/trace_result_file.h"
#include "server/api_keys.h"
#include "server/model_server.h"
#include "support/loopback.h"
#include "support/real_model.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using nlohmann::json;
const char* kAlice = "sk-alice-0123456789abcdef";
const char* kBob = "sk-bob-0123456789abcdef0";
const char* kEiffel = "The Eiffel Tower is located in the city of";

struct Shared {
  testing::ScratchDir dir;
  std::unique_ptr<server::ModelServer> srv;
  std::string url;
  Shared() {
    server::ServeOptions o;
    o.engine = EngineArgs().model(testing::default_model_path()).show_progress(false);
    o.served_model_name = "smollm2-135m";
    o.port = 0;
    o.api_keys_file =
        dir.write("keys", std::string("alice:") + kAlice + "\nbob:sha256:" + server::ApiKeys::sha256_hex(kBob) + "\n");
    o.limits.max_concurrent_traces = 2;
    o.limits.max_queued_traces = 2;
    o.limits.max_saved_bytes = 4 << 20;
    o.limits.max_trace_seconds = 8;
    o.limits.max_tokens_per_minute = 1000000;  // counted: traces reach the engine tokenized
    srv = std::make_unique<server::ModelServer>(o);
    url = "http://127.0.0.1:" + std::to_string(srv->port());
  }
};

Shared& shared() {
  static Shared* s = new Shared();
  return *s;
}

remote::HttpResult call(const std::string& method, const std::string& target, const json& body = nullptr,
                        const std::string& key = kAlice) {
  remote::HttpClient c(shared().url, key);
  return c.request(method, target, body.is_null() ? "" : body.dump());
}

json ok_json(const remote::HttpResult& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(RealModelServer, HealthModelsAndStructure) {
  EXPECT_EQ(call("GET", "/health", nullptr, "").status, 200);
  json models = ok_json(call("GET", "/v1/models"));
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "smollm2-135m");
  json s = ok_json(call("GET", "/v1/models/smollm2-135m/structure"));
  EXPECT_EQ(s["config"]["num_layers"], 30);
  EXPECT_EQ(s["config"]["hidden_size"], 576);
  bool found = false;
  for (const auto& m : s["modules"]) found = found || m["path"] == "model.layers.5.mlp";
  EXPECT_TRUE(found);
  EXPECT_EQ(call("GET", "/v1/models/other/structure").status, 404);
  EXPECT_EQ(call("GET", "/v1/nothing").status, 404);
}

TEST(RealModelServer, CompletionSaysParis) {
  json r = ok_json(call("POST", "/v1/completions",
                        {{"model", "smollm2-135m"}, {"prompt", kEiffel}, {"max_tokens", 1}, {"temperature", 0}}));
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], " Paris");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 1);
  // Streamed: the same text arrives as server-sent events.
  remote::HttpResult s =
      call("POST", "/v1/completions", {{"prompt", kEiffel}, {"max_tokens", 3}, {"temperature", 0}, {"stream", true}});
  EXPECT_EQ(s.status, 200);
  EXPECT_NE(s.body.find("data: [DONE]"), std::string::npos) << s.body;
  EXPECT_NE(s.body.find("\" Paris\""), std::string::npos) << s.body;
  // A stop string is never streamed, not even its first characters.
  remote::HttpResult cut =
      call("POST", "/v1/completions",
           {{"prompt", kEiffel}, {"max_tokens", 8}, {"temperature", 0}, {"stream", true}, {"stop", ", France"}});
  std::string streamed;
  for (size_t at = 0; (at = cut.body.find("data: {", at)) != std::string::npos; ++at) {
    json chunk = json::parse(cut.body.substr(at + 6, cut.body.find("\n\n", at) - at - 6));
    streamed += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, " Paris") << cut.body;
  // Fields the engine does not implement are refused, by name.
  remote::HttpResult bad = call("POST", "/v1/completions", {{"prompt", "x"}, {"n", 2}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("'n': not implemented"), std::string::npos) << bad.body;
  EXPECT_EQ(call("POST", "/v1/completions", {{"prompt", "x"}, {"frequency_penalty", 0.5}}).status, 400);
  EXPECT_EQ(call("POST", "/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}}).status, 404);
}

TEST(RealModelServer, KeysAndTenants) {
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "").status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "sk-wrong-0123456789abcdef").status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, kBob).status, 200);
  json graph = json::parse(read_text(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/ablate_mlp.json"));
  remote::HttpResult posted = call("POST", "/v1/traces", {{"prompts", {kEiffel}}, {"graphs", {graph}}});
  ASSERT_EQ(posted.status, 202) << posted.body;
  const std::string id = json::parse(posted.body)["id"];
  // Another key sees nothing of it.
  EXPECT_EQ(call("GET", "/v1/traces/" + id, nullptr, kBob).status, 404);
  EXPECT_EQ(call("GET", "/v1/traces/" + id + "/saves?wait=1", nullptr, kBob).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/traces/" + id, nullptr, kBob).status, 404);
  remote::HttpResult saves = call("GET", "/v1/traces/" + id + "/saves?wait=1");
  EXPECT_EQ(saves.status, 200);
  json st = ok_json(call("GET", "/v1/traces/" + id));
  EXPECT_EQ(st["state"], "done");
  EXPECT_EQ(st["step"], 1);
  // Fetched saves are released.
  EXPECT_EQ(call("GET", "/v1/traces/" + id + "/saves").status, 410);
}

TEST(RealModelServer, JsonTraceEqualsTheLocalGraphTrace) {
  const std::string path = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/logit_lens.json";
  const std::string text = read_text(path);
  remote::HttpResult r = call("POST", "/v1/traces?wait=1",
                              {{"prompts", {kEiffel}}, {"graphs", {text}}, {"graph_names", {"logit_lens.json"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  // The same trace in this process, written the way `nnsight trace` writes it.
  LLM local(EngineArgs().model(testing::default_model_path()).show_progress(false));
  std::vector<tracing::GraphFile> graphs{tracing::parse_graph_file("logit_lens.json", text)};
  TraceResult mine = tracing::run_graph_trace(local, std::vector<std::string>{kEiffel}, graphs,
                                              SamplingParams().temperature(0).max_tokens(1));
  EXPECT_EQ(r.body, tracing::encode_trace_result(mine, {kEiffel}));
  TraceResult theirs = tracing::decode_trace_result(r.body, "answer");
  EXPECT_EQ(theirs.output().text, " Paris");
}

TEST(RealModelServer, StaticErrorsComeBackWithTheirPlace) {
  const std::string text = read_text(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/bad_reference.json");
  remote::HttpResult r =
      call("POST", "/v1/traces", {{"prompts", {"hi"}}, {"graphs", {text}}, {"graph_names", {"bad.json"}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("bad.json:"), std::string::npos) << r.body;
  json unknown = {
      {"nodes",
       {{{"kind", "get"}, {"key", "model.layers.5.mpl.output"}}, {{"kind", "save"}, {"name", "x"}, {"args", {0}}}}}};
  r = call("POST", "/v1/traces", {{"prompts", {"hi"}}, {"graphs", {unknown}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("did you mean"), std::string::npos) << r.body;
  EXPECT_EQ(call("POST", "/v1/traces", json::parse("{\"prompts\": [\"hi\"]}")).status, 400);
  EXPECT_EQ(call("POST", "/v1/traces", {{"invokes", {{{"prompt", "hi"}, {"payload", "AAAA"}}}}}).status, 400);
  EXPECT_EQ(call("POST", "/v1/traces", {{"prompts", {"hi"}}, {"graphs", {unknown}}, {"extra", 1}}).status, 400);
}

TEST(RealModelServer, RemoteLanguageModelEqualsInProcessBitForBit) {
  auto body = [](LanguageModel& lm, Saved& h, Saved& logits) {
    return [&lm, &h, &logits](Tracer&) {
      auto mlp = lm.envoy("model.layers.20.mlp");
      mlp.output() = mlp.output() * 0;
      h = lm.envoy("model.layers.25").output().save();
      logits = lm.logits().save();
    };
  };
  LanguageModel remote_lm(EngineArgs().remote(shared().url).api_key(kAlice));
  LanguageModel local_lm(EngineArgs().model(testing::default_model_path()).show_progress(false));
  Saved h1, l1, h2, l2;
  TraceResult there = remote_lm.trace(kEiffel, SamplingParams().temperature(0).max_tokens(2), body(remote_lm, h1, l1));
  TraceResult here = local_lm.trace(kEiffel, SamplingParams().temperature(0).max_tokens(2), body(local_lm, h2, l2));
  EXPECT_TRUE(there[h1].equal(here[h2]));
  EXPECT_TRUE(there[l1].equal(here[l2]));
  EXPECT_EQ(there.output().token_ids, here.output().token_ids);
  EXPECT_EQ(there.text(), here.text());
  // Static checks run in the client, against the server's structure.
  EXPECT_THROW(remote_lm.envoy("model.layers.5.mpl"), TraceError);
  EXPECT_EQ(remote_lm.config().num_layers, 30);
  EXPECT_EQ(remote_lm.encode("Paris"), local_lm.encode("Paris"));
  EXPECT_THROW(remote_lm.parameter("model.norm.weight"), Error);
  // A wrong key is refused at construction.
  EXPECT_THROW(LanguageModel(EngineArgs().remote(shared().url).api_key("sk-wrong-0123456789abc")), Error);
}

TEST(RealModelServer, RemoteInvokesOfSeveralPromptsEqualInProcess) {
  auto body = [](LanguageModel& lm, Saved& logits, Saved& h) {
    return [&lm, &logits, &h](Tracer& t) {
      t.invoke(std::vector<std::string>{kEiffel, "The capital of Italy is"}, [&] {
        h = lm.envoy("model.layers.3").output().save();
        logits = lm.logits().save();
      });
      t.invoke("The chemical symbol for gold is",
               [&] { lm.envoy("model.layers.3.mlp").output() = lm.envoy("model.layers.3.mlp").output() * 0; });
    };
  };
  LanguageModel remote_lm(EngineArgs().remote(shared().url).api_key(kAlice));
  LanguageModel local_lm(EngineArgs().model(testing::default_model_path()).show_progress(false));
  Saved l1, h1, l2, h2;
  TraceResult there = remote_lm.trace(SamplingParams().temperature(0).max_tokens(1), body(remote_lm, l1, h1));
  TraceResult here = local_lm.trace(SamplingParams().temperature(0).max_tokens(1), body(local_lm, l2, h2));
  ASSERT_EQ(there[l1].sizes(), (std::vector<int64_t>{2, 49152}));
  EXPECT_TRUE(there[l1].equal(here[l2]));
  EXPECT_TRUE(there[h1].equal(here[h2]));
  ASSERT_EQ(there.outputs().size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(there.text(i), here.text(i));
  EXPECT_EQ(there.text(0), " Paris");
}

TEST(RealModelServer, LimitsOnSavesWallTimeAndQueue) {
  // Saves over 4 MiB: every layer's output over a prompt of about 140 tokens
  // (30 x 140 x 576 floats, 9.7 MB). Short enough that its prefill stays far
  // inside the 8 s wall-time limit under AddressSanitizer on 2 cores.
  json nodes = json::array();
  for (int layer = 0; layer < 30; ++layer) {
    nodes.push_back({{"kind", "get"}, {"key", "model.layers." + std::to_string(layer) + ".output"}});
    nodes.push_back({{"kind", "save"}, {"name", "l" + std::to_string(layer)}, {"args", {2 * layer}}});
  }
  std::string prompt;
  for (int i = 0; i < 20; ++i) prompt += "The Eiffel Tower is in Paris. ";
  remote::HttpResult r = call("POST", "/v1/traces?wait=1", {{"prompts", {prompt}}, {"graphs", {{{"nodes", nodes}}}}});
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("saved bytes limit"), std::string::npos) << r.body;

  // Wall time: 8 s allowed; a generation of 4000 tokens takes far longer.
  json logits = {{"nodes", {{{"kind", "get"}, {"key", "logits"}}, {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}};
  json long_run = {{"prompts", {"Once upon a time"}},
                   {"graphs", {logits}},
                   {"sampling_params", {{"max_tokens", 4000}, {"ignore_eos", true}}}};
  // Two run, two wait, the fifth is refused (limits 2 and 2).
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    remote::HttpResult p = call("POST", "/v1/traces", long_run);
    ASSERT_EQ(p.status, 202) << p.body;
    ids.push_back(json::parse(p.body)["id"]);
  }
  remote::HttpResult over = call("POST", "/v1/traces", long_run);
  EXPECT_EQ(over.status, 429);
  EXPECT_NE(over.body.find("queued traces limit"), std::string::npos) << over.body;
  // Another key is not held up.
  EXPECT_EQ(call("POST", "/v1/completions", {{"prompt", kEiffel}, {"max_tokens", 1}, {"temperature", 0}}, kBob).status,
            200);
  // Progress is visible while it runs.
  json st = ok_json(call("GET", "/v1/traces/" + ids[0]));
  for (int i = 0; i < 200 && st["step"] == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    st = ok_json(call("GET", "/v1/traces/" + ids[0]));
  }
  EXPECT_EQ(st["state"], "running");
  EXPECT_GT(st["step"].get<int64_t>(), 0);
  EXPECT_EQ(ok_json(call("GET", "/v1/traces/" + ids[3]))["state"], "queued");
  // Cancel the queued ones and one running; the other hits the wall-time limit.
  ok_json(call("DELETE", "/v1/traces/" + ids[3]));
  ok_json(call("DELETE", "/v1/traces/" + ids[2]));
  ok_json(call("DELETE", "/v1/traces/" + ids[1]));
  // A cancelled trace's saves are gone for good: 410, a standard code (not nginx's 499).
  EXPECT_EQ(call("GET", "/v1/traces/" + ids[3] + "/saves?wait=1").status, 410);
  EXPECT_EQ(call("GET", "/v1/traces/" + ids[1] + "/saves?wait=1").status, 410);
  remote::HttpResult timed = call("GET", "/v1/traces/" + ids[0] + "/saves?wait=1");
  EXPECT_EQ(timed.status, 422);
  EXPECT_NE(timed.body.find("wall time limit"), std::string::npos) << timed.body;
}

TEST(RealModelServer, ClientThatLeavesCancelsItsTrace) {
  json logits = {{"nodes", {{{"kind", "get"}, {"key", "logits"}}, {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}};
  const std::string body = json{{"prompts", {"Once upon a time"}},
                                {"graphs", {logits}},
                                {"sampling_params", {{"max_tokens", 4000}, {"ignore_eos", true}}}}
                               .dump();
  const int port = std::stoi(shared().url.substr(shared().url.rfind(':') + 1));
  int fd = testing::connect_loopback(port);
  const std::string req = "POST /v1/traces?wait=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kBob) +
                          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ::close(fd);
  // The server sees the client leave within its 50 ms poll and cancels.
  json newest;
  for (int i = 0; i < 100; ++i) {
    newest = ok_json(call("GET", "/v1/traces", nullptr, kBob))["data"][0];
    if (newest["state"] == "cancelled") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(newest["state"], "cancelled") << newest.dump();
  EXPECT_LT(newest["step"].get<int64_t>(), 4000);
}

int shared_port() { return std::stoi(shared().url.substr(shared().url.rfind(':') + 1)); }

// Sends `text` on a new connection and reads until the server closes it;
// with `half_close`, shuts the sending side first (shutdown(SHUT_WR)).
std::string raw_exchange(int port, const std::string& text, bool half_close = false) {
  return testing::exchange_loopback(port, text, half_close, 120);
}

std::string post_request(const std::string& target, const std::string& body, const std::string& auth) {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth +
         "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// The status of the last response in `out` (after any interim 1xx).
int final_status(const std::string& out) {
  size_t at = 0, last = std::string::npos;
  while ((at = out.find("HTTP/1.1 ", at)) != std::string::npos) last = at++;
  return last == std::string::npos ? 0 : std::stoi(out.substr(last + 9, 3));
}

// A client's mistake is a 4xx in the documented shape, with no JSON-library text.
void expect_client_error(const remote::HttpResult& r, int status, const std::string& words) {
  EXPECT_EQ(r.status, status) << r.body;
  json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["error"]["code"], status) << r.body;
  EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(words), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("json.exception"), std::string::npos) << r.body;
}

TEST(RealModelServer, TokenIdsAreRangeCheckedBeforeNarrowing) {
  // 4294967297 is 2^32 + 1: narrowed to 32 bits it would be token 1.
  for (const char* ids : {"[4294967297]", "[4294967296]", "[-4294967296]", "[49152]", "[-1]"}) {
    remote::HttpResult r =
        call("POST", "/v1/completions", {{"prompt", json::parse(ids)}, {"max_tokens", 1}, {"temperature", 0}});
    expect_client_error(r, 400, "prompt[0]");
    r = call("POST", "/v1/completions", {{"prompt", {json::parse(ids)}}, {"max_tokens", 1}});
    expect_client_error(r, 400, "prompt[0][0]");
    expect_client_error(call("POST", "/v1/detokenize", {{"tokens", json::parse(ids)}}), 400, "tokens[0]");
  }
  expect_client_error(call("POST", "/v1/traces",
                           {{"prompt_token_ids", {json::parse("[4294967297]")}},
                            {"graphs", {{{"nodes", {{{"kind", "get"}, {"key", "logits"}}}}}}}}),
                      400, "prompt_token_ids[0][0]");
  expect_client_error(call("POST", "/v1/traces",
                           {{"invokes", {{{"prompt_token_ids", json::parse("[4294967297]")}, {"payload", "AAAA"}}}}}),
                      400, "invokes[0].prompt_token_ids[0]");
  expect_client_error(
      call("POST", "/v1/completions", {{"prompt", "x"}, {"stop_token_ids", json::parse("[4294967298]")}}), 400,
      "stop_token_ids[0]");
  // In range, the same ids still work.
  json ok = ok_json(call("POST", "/v1/detokenize", {{"tokens", {1}}}));
  EXPECT_TRUE(ok["prompt"].is_string());
}

TEST(RealModelServer, ClientMistakesAre4xxWithTheDocumentedShape) {
  expect_client_error(call("POST", "/v1/completions", {{"prompt", "x"}, {"stream", "yes"}}), 400, "'stream'");
  expect_client_error(call("POST", "/v1/completions", {{"prompt", "x"}, {"stream_options", {{"include_usage", 1}}}}),
                      400, "include_usage");
  expect_client_error(call("POST", "/v1/tokenize", {{"prompt", 5}}), 400, "'prompt'");
  expect_client_error(call("POST", "/v1/tokenize", {{"prompt", "x"}, {"add_special_tokens", "no"}}), 400,
                      "add_special_tokens");
  expect_client_error(call("POST", "/v1/detokenize", {{"tokens", "abc"}}), 400, "tokens");
  // max_tokens: an integer that fits, not 2.5 read as 2 nor 2^63 read as negative.
  expect_client_error(call("POST", "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2.5}}), 400, "max_tokens");
  expect_client_error(
      call("POST", "/v1/completions", {{"prompt", "x"}, {"max_tokens", json::parse("9223372036854775808")}}), 400,
      "max_tokens");
  expect_client_error(call("POST", "/v1/completions", {{"prompt", "x"}, {"seed", -1}}), 400, "seed");
  // A prompt longer than the model can ever run: whole, streamed, traced.
  const json too_long = std::vector<int>(20000, 1);
  expect_client_error(call("POST", "/v1/completions", {{"prompt", too_long}, {"max_tokens", 1}}), 400, "prompt of");
  expect_client_error(call("POST", "/v1/completions", {{"prompt", too_long}, {"max_tokens", 1}, {"stream", true}}), 400,
                      "prompt of");
  json logits = {{"nodes", {{{"kind", "get"}, {"key", "logits"}}, {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}};
  expect_client_error(call("POST", "/v1/traces?wait=1", {{"prompt_token_ids", {too_long}}, {"graphs", {logits}}}), 400,
                      "prompt of");
  // Methods: an unknown one is 501, a known one on the wrong path 405.
  const int port = shared_port();
  EXPECT_EQ(final_status(raw_exchange(port, "BREW /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 501);
  EXPECT_EQ(final_status(raw_exchange(port, "PUT /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 405);
}

TEST(RealModelServer, AuthorizationSchemeIsCaseInsensitiveAndSingle) {
  const int port = shared_port();
  const std::string body = json{{"prompt", kEiffel}, {"max_tokens", 1}, {"temperature", 0}}.dump();
  for (const std::string scheme : {"bearer ", "BEARER ", "Bearer  "}) {
    const std::string out = raw_exchange(port, post_request("/v1/completions", body, scheme + kAlice));
    EXPECT_EQ(final_status(out), 200) << out;
  }
  // Two Authorization headers: refused, not the last one wins.
  const std::string two = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kBob) +
                          "\r\nAuthorization: Bearer " + std::string(kAlice) +
                          "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(final_status(raw_exchange(port, two)), 400);
}

TEST(RealModelServer, HalfClosedClientsGetTheirAnswer) {
  const int port = shared_port();
  const std::string body = json{{"prompt", kEiffel}, {"max_tokens", 30}, {"temperature", 0}}.dump();
  for (int i = 0; i < 3; ++i) {
    const std::string out = raw_exchange(port, post_request("/v1/completions", body, std::string("Bearer ") + kAlice),
                                         /*half_close=*/true);
    EXPECT_EQ(final_status(out), 200) << out;
    EXPECT_NE(out.find("\"text_completion\""), std::string::npos) << out;
  }
  // A trace waited on, the same.
  json logits = {{"nodes", {{{"kind", "get"}, {"key", "logits"}}, {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}};
  const std::string trace =
      json{{"prompts", {kEiffel}}, {"graphs", {logits}}, {"sampling_params", {{"max_tokens", 5}}}}.dump();
  const std::string out =
      raw_exchange(port, post_request("/v1/traces?wait=1", trace, std::string("Bearer ") + kAlice), true);
  EXPECT_EQ(final_status(out), 200) << out.substr(0, 400);
}

TEST(RealModelServer, SavesAreCountedAsTheyAreMade) {
  // Logits (49152 floats, 192 KiB) appended at every step, against 4 MiB:
  // the trace fails at the step that crosses the limit, not after 1500 steps.
  json nodes = {{{"kind", "iter"}, {"start", 0}, {"stop", "all"}},
                {{"kind", "get"}, {"key", "logits"}, {"step", {{"iter", 0}}}},
                {{"kind", "save"}, {"name", "l"}, {"args", {1}}, {"mode", "append"}},
                {{"kind", "end"}}};
  remote::HttpResult posted = call("POST", "/v1/traces",
                                   {{"prompts", {"Once upon a time"}},
                                    {"graphs", {{{"nodes", nodes}}}},
                                    {"sampling_params", {{"max_tokens", 1500}, {"ignore_eos", true}}}});
  ASSERT_EQ(posted.status, 202) << posted.body;
  const std::string id = json::parse(posted.body)["id"];
  remote::HttpResult saves = call("GET", "/v1/traces/" + id + "/saves?wait=1");
  EXPECT_EQ(saves.status, 413) << saves.body;
  EXPECT_NE(saves.body.find("saved bytes limit"), std::string::npos) << saves.body;
  EXPECT_NE(saves.body.find("the limit is 4.0 MiB"), std::string::npos) << saves.body;
  json st = ok_json(call("GET", "/v1/traces/" + id));
  EXPECT_EQ(st["state"], "failed");
  EXPECT_LT(st["step"].get<int64_t>(), 40) << st.dump();  // 21 saves fit in 4 MiB
}

TEST(RealModelServer, StopEndsRunningRequestsWithAnErrorAnswer) {
  server::ServeOptions o;
  o.engine = EngineArgs().model(testing::default_model_path()).show_progress(false);
  o.served_model_name = "smollm2-135m";
  o.port = 0;
  server::ModelServer srv(o);
  const int port = srv.port();
  const json long_run = {{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"ignore_eos", true}};
  json streamed = long_run;
  streamed["stream"] = true;
  json logits = {{"nodes", {{{"kind", "get"}, {"key", "logits"}}, {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}};
  const json trace = {{"prompts", {"Once upon a time"}},
                      {"graphs", {logits}},
                      {"sampling_params", {{"max_tokens", 4000}, {"ignore_eos", true}}}};
  std::string whole, stream, traced;
  std::thread a([&] { whole = raw_exchange(port, post_request("/v1/completions", long_run.dump(), "Bearer x")); });
  std::thread b([&] { stream = raw_exchange(port, post_request("/v1/completions", streamed.dump(), "Bearer x")); });
  std::thread c([&] { traced = raw_exchange(port, post_request("/v1/traces?wait=1", trace.dump(), "Bearer x")); });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  srv.stop();  // what SIGTERM does
  a.join();
  b.join();
  c.join();
  // Each running request ends with an error answer, not a bare closed connection.
  EXPECT_EQ(final_status(whole), 503) << whole;
  EXPECT_NE(whole.find("shutting down"), std::string::npos) << whole;
  EXPECT_EQ(final_status(stream), 200) << stream.substr(0, 300);
  EXPECT_NE(stream.find("shutting down"), std::string::npos)
      << stream.substr(stream.size() - std::min<size_t>(stream.size(), 600));
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(final_status(traced), 503) << traced;
  EXPECT_NE(traced.find("shutting down"), std::string::npos) << traced;
}

// The worker processes this process started (nnsight-worker children).
std::vector<pid_t> worker_children() {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos || line.find("(nnsight-worker") == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    rest >> state >> ppid;
    if (ppid == ::getpid()) out.push_back(std::stoi(name));
  }
  return out;
}

TEST(RealModelServer, ReplicasShareTheLoadAndAKilledWorkerFailsOnlyItsReplicasTraces) {
  server::ServeOptions o;
  o.engine = EngineArgs().model(testing::default_model_path()).show_progress(false).executor("mp");
  o.served_model_name = "smollm2-135m";
  o.port = 0;
  o.replicas = 2;
  server::ModelServer srv(o);
  remote::HttpClient c("http://127.0.0.1:" + std::to_string(srv.port()), "");
  EXPECT_EQ(json::parse(c.request("GET", "/v1/models").body)["data"][0]["replicas"], 2);
  json logits = {{"nodes", {{{"kind", "get"}, {"key", "logits"}}, {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}};
  json long_run = {{"prompts", {"Once upon a time"}},
                   {"graphs", {logits}},
                   {"sampling_params", {{"max_tokens", 4000}, {"ignore_eos", true}}}};
  // Four long traces: two on each replica (the fewest outstanding requests wins).
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(json::parse(c.request("POST", "/v1/traces", long_run.dump()).body)["id"]);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (const auto& id : ids) {
    json st = json::parse(c.request("GET", "/v1/traces/" + id).body);
    ASSERT_EQ(st["state"], "running") << st.dump();
  }
  std::vector<pid_t> workers = worker_children();
  ASSERT_EQ(workers.size(), 2u);
  ::kill(workers[0], SIGKILL);
  // The killed replica's traces fail naming the worker; the other replica's run on.
  int failed = 0;
  std::vector<std::string> alive;
  // Until a failure shows, then once more a second later (the killed
  // replica's traces end one after the other).
  for (int round = 0, settle = 0; round < 200 && settle < 2; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(failed ? 1000 : 50));
    settle += failed ? 1 : 0;
    failed = 0;
    alive.clear();
    for (const auto& id : ids) {
      json st = json::parse(c.request("GET", "/v1/traces/" + id).body);
      if (st["state"] == "failed") {
        ++failed;
        EXPECT_NE(st["error"].get<std::string>().find("worker"), std::string::npos) << st.dump();
        // The server failed, not the client's trace: 5xx, a server_error.
        remote::HttpResult saves = c.request("GET", "/v1/traces/" + id + "/saves");
        EXPECT_EQ(saves.status, 503) << saves.body;
        EXPECT_NE(saves.body.find("server_error"), std::string::npos) << saves.body;
      } else {
        alive.push_back(id);
      }
    }
  }
  std::string diag;
  for (const auto& id : ids) diag += c.request("GET", "/v1/traces/" + id).body + "\n";
  EXPECT_GE(failed, 1) << diag;
  ASSERT_GE(alive.size(), 1u) << diag;
  for (const auto& id : alive) {
    // It keeps stepping (give it time: the restarted worker loads the model
    // on the same cores).
    json before = json::parse(c.request("GET", "/v1/traces/" + id).body), after = before;
    for (int i = 0; i < 200 && after["step"] == before["step"]; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      after = json::parse(c.request("GET", "/v1/traces/" + id).body);
    }
    EXPECT_EQ(after["state"], "running") << after.dump();
    EXPECT_GT(after["step"].get<int64_t>(), before["step"].get<int64_t>()) << after.dump();
    c.request("DELETE", "/v1/traces/" + id);
  }
  // Later traces are served, by both replicas (the failed one restarted its worker).
  json lens = json::parse(read_text(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/logit_lens.json"));
  for (int i = 0; i < 2; ++i) {
    remote::HttpResult r =
        c.request("POST", "/v1/traces?wait=1", json{{"prompts", {kEiffel}}, {"graphs", {lens}}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(tracing::decode_trace_result(r.body, "after").output().text, " Paris");
  }
  EXPECT_EQ(worker_children().size(), 2u);
}

TEST(RealModelServer, KeptSavesAreBoundedInBytesAndTime) {
  server::ServeOptions o;
  o.engine = EngineArgs().model(testing::default_model_path()).show_progress(false);
  o.served_model_name = "smollm2-135m";
  o.port = 0;
  o.retention_s = 4;
  o.max_retained_bytes = 300 << 10;  // one logits save (192 KiB) fits, two do not
  server::ModelServer srv(o);
  remote::HttpClient c("http://127.0.0.1:" + std::to_string(srv.port()), "");
  json logits = {{"nodes", {{{"kind", "get"}, {"key", "logits"}}, {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}};
  // Kept saves are bounded: the second unfetched result pushes out the first,
  // and the retention time releases the rest.
  json short_run = {{"prompts", {kEiffel}}, {"graphs", {logits}}};
  const std::string first = json::parse(c.request("POST", "/v1/traces", short_run.dump()).body)["id"];
  while (json::parse(c.request("GET", "/v1/traces/" + first).body)["state"] != "done")
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string second = json::parse(c.request("POST", "/v1/traces", short_run.dump()).body)["id"];
  while (json::parse(c.request("GET", "/v1/traces/" + second).body)["state"] != "done")
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  remote::HttpResult gone = c.request("GET", "/v1/traces/" + first + "/saves");
  EXPECT_EQ(gone.status, 410);
  EXPECT_NE(gone.body.find("make room"), std::string::npos) << gone.body;
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  gone = c.request("GET", "/v1/traces/" + second + "/saves");
  EXPECT_EQ(gone.status, 410);
  EXPECT_NE(gone.body.find("unfetched"), std::string::npos) << gone.body;
}

}  // namespace
}  // namespace nnsight
