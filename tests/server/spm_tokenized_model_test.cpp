// A model whose tokenizer is SentencePiece-style (tests/data/models/mistral_spm:
// byte fallback, Metaspace, the Llama 2 chat template) answers text prompts
// through every front door: `nnsight trace`, the C++ trace API, and the
// server's completions, chat and traces -- each giving what the engine gives
// for the same tokens.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "core/safetensors/safetensors_file.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer_loader.h"
#include "front/remote/http_client.h"
#include "server/model_server.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

#ifndef NNSIGHT_CLI
#error "the test needs the nnsight CLI (NNSIGHT_CLI)"
#endif

using nlohmann::json;

const std::string kModel = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/models/mistral_spm";
const std::string kGraph = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/ablate_mlp_tiny.json";
const char* kPrompt = "The capital of France is";

EngineArgs args() { return EngineArgs().model(kModel).kv_cache_memory_mb(4).show_progress(false); }
SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST(SpmTokenizedModel, TraceCliEqualsTheCppTrace) {
  testing::ScratchDir dir;
  const std::string out = dir.file("saves.safetensors");
  const std::string cmd = std::string(NNSIGHT_CLI) + " trace --model " + quote(kModel) + " --prompt " + quote(kPrompt) +
                          " --graph " + quote(kGraph) +
                          " --max-tokens 3 --ignore-eos --kv-cache-mb 4 --no-progress --out " + quote(out);
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int st = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;

  LanguageModel lm(args());
  Saved layer1, logits;
  TraceResult cpp = lm.trace(kPrompt, greedy(3), [&](Tracer&) {
    auto mlp = lm.envoy("model.layers.0.mlp");
    mlp.output() = mlp.output() * 0.0;
    layer1 = lm.envoy("model.layers.1").output().save();
    logits = lm.logits().save();
  });
  EXPECT_EQ(text, cpp.text() + "\n");
  // The prompt went in as SentencePiece pieces: BOS, then "▁The" ...
  const std::vector<int32_t> ids = lm.encode(kPrompt);
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(ids[0], 1);
  SafetensorsFile file(out);
  EXPECT_EQ(file.load("layer1").size(0), static_cast<int64_t>(ids.size()));
  EXPECT_TRUE(at::equal(file.load("layer1"), cpp[layer1]));
  EXPECT_TRUE(at::equal(file.load("logits"), cpp[logits]));
}

struct Served {
  std::unique_ptr<server::ModelServer> srv;
  std::string url;
  Served() {
    server::ServeOptions o;
    o.engine = args();
    o.served_model_name = "mistral-spm";
    o.port = 0;
    srv = std::make_unique<server::ModelServer>(o);
    url = "http://127.0.0.1:" + std::to_string(srv->port());
  }
  remote::HttpResult post(const std::string& target, const json& body) const {
    remote::HttpClient c(url, "");
    return c.request("POST", target, body.dump());
  }
};

TEST(SpmTokenizedModel, ServerCompletionsChatAndTracesAnswerTextPrompts) {
  Served s;
  LLM llm(args());
  // Completions: the text the engine generates for the prompt's pieces.
  const RequestOutput want = llm.generate(kPrompt, greedy(5));
  remote::HttpResult r =
      s.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["text"], want.text);
  EXPECT_EQ(j["usage"]["prompt_tokens"], want.prompt_token_ids.size());

  // Chat: the Llama 2 template of tokenizer_config.json, rendered as
  // transformers renders it (tests/data/chat/llama2.*), then its pieces.
  const auto tok = load_tokenizer_for_model(kModel);
  const std::string rendered =
      ChatTemplate(tok.chat_template()).render({{"user", "Where is Paris?"}}, true, tok.bos_token(), tok.eos_token());
  EXPECT_EQ(rendered, "<s>[INST] Where is Paris? [/INST]");
  const std::vector<int32_t> chat_ids = llm.encode(rendered, false);
  EXPECT_EQ(chat_ids[0], 1) << "the template's <s> is the BOS token";
  const RequestOutput chat_want = llm.submit(chat_ids, greedy(5)).result.get();
  r = s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Where is Paris?"}}}},
                                      {"max_tokens", 5},
                                      {"temperature", 0},
                                      {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], chat_want.text);
  EXPECT_EQ(j["usage"]["prompt_tokens"], chat_ids.size());

  // Traces as data: the JSON graph on a text prompt.
  std::ifstream in(kGraph);
  const json graph = json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  r = s.post("/v1/traces?wait=1", {{"prompts", {kPrompt}}, {"graphs", {graph}}});
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
}

}  // namespace
}  // namespace nnsight
