// Tokenizer::from_hf_json on small tokenizer.json files written by the test
// (built from tiny_spec()), including every kind of bad file we reject.
#include "core/tokenizer/tokenizer_json.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "support/scratch_dir.h"
#include "support/tiny_tokenizer_spec.h"

namespace nnsight {
namespace {

using json = nlohmann::json;
using testing::ScratchDir;
using testing::tiny_spec;

json tiny_json() {
  const TokenizerSpec s = tiny_spec();
  json vocab = json::object();
  for (size_t i = 0; i < s.tokens.size(); ++i) vocab[s.tokens[i]] = i;
  json added = json::array();
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (s.token_types[i] == 1) continue;
    added.push_back({{"id", i},
                     {"content", s.tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", s.token_types[i] == 3}});
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", s.merges}, {"unk_token", nullptr}}}};
}

const std::vector<std::string> kTexts = {"hello world", "<|im_start|>abc<tool_call>aaaaa", "é 12\n\n", "<s>x</s>"};

void expect_same_as_tiny_spec(const Tokenizer& t) {
  TokenizerSpec spec = tiny_spec();
  const Tokenizer ref(spec);
  for (const std::string& s : kTexts) EXPECT_EQ(t.encode(s, false), ref.encode(s, false)) << s;
  EXPECT_EQ(t.vocab_size(), ref.vocab_size());
}

TEST(TokenizerJson, LoadsLikeTheSpecItWasWrittenFrom) {
  ScratchDir dir;
  const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump()));
  expect_same_as_tiny_spec(t);
  EXPECT_TRUE(t.is_special(0));
  EXPECT_FALSE(t.is_special(3));  // special: false -> user-defined
  EXPECT_FALSE(t.add_bos());      // no template, no config
  EXPECT_EQ(t.bos_id(), -1);
}

TEST(TokenizerJson, AcceptsMergesAsPairs) {
  json j = tiny_json();
  json pairs = json::array();
  for (const std::string& m : tiny_spec().merges) {
    pairs.push_back({m.substr(0, m.find(' ')), m.substr(m.find(' ') + 1)});
  }
  j["model"]["merges"] = pairs;
  ScratchDir dir;
  expect_same_as_tiny_spec(Tokenizer::from_hf_json(dir.write("tokenizer.json", j.dump())));
}

TEST(TokenizerJson, ConfigBesideItSetsBosAndEos) {
  ScratchDir dir;
  dir.write("tokenizer_config.json",
            R"({"add_bos_token": true, "bos_token": {"content": "<s>", "lstrip": false},
                "eos_token": "</s>", "pad_token": null})");
  const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump()));
  EXPECT_TRUE(t.add_bos());
  EXPECT_FALSE(t.add_eos());
  EXPECT_EQ(t.bos_id(), 0);
  EXPECT_EQ(t.eos_id(), 1);
  EXPECT_EQ(t.pad_id(), -1);
  EXPECT_EQ(t.encode("hello").front(), 0);
}

TEST(TokenizerJson, ChatTemplateFromTheConfigOrBesideIt) {
  {
    ScratchDir dir;
    const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump()));
    EXPECT_EQ(t.chat_template(), "");
  }
  {
    ScratchDir dir;
    dir.write("tokenizer_config.json",
              R"({"bos_token": "<s>", "eos_token": "</s>", "chat_template": "{{ bos_token }}x"})");
    const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump()));
    EXPECT_EQ(t.chat_template(), "{{ bos_token }}x");
    EXPECT_EQ(t.bos_token(), "<s>");
    EXPECT_EQ(t.eos_token(), "</s>");
  }
  {
    // transformers' named templates: apply_chat_template uses "default".
    ScratchDir dir;
    dir.write("tokenizer_config.json",
              R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
    EXPECT_EQ(Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump())).chat_template(), "D");
  }
  {
    ScratchDir dir;
    dir.write("chat_template.jinja", "{{ messages }}\n");
    EXPECT_EQ(Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump())).chat_template(),
              "{{ messages }}\n");
    // Beside tokenizer_config.json's, the file wins (transformers: template files take priority).
    dir.write("tokenizer_config.json", R"({"chat_template": "C"})");
    EXPECT_EQ(Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump())).chat_template(),
              "{{ messages }}\n");
  }
  {
    // A multimodal repository's processor file, read when nothing else has a template.
    ScratchDir dir;
    dir.write("chat_template.json", R"({"chat_template": "{{ messages[0] }}"})");
    EXPECT_EQ(Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump())).chat_template(),
              "{{ messages[0] }}");
    dir.write("tokenizer_config.json", R"({"chat_template": "C"})");
    EXPECT_EQ(Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump())).chat_template(), "C")
        << "tokenizer_config.json's comes first";
    dir.write("tokenizer_config.json", "{}");
    dir.write("chat_template.json", R"({"chat_template": ["x"]})");
    try {
      Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump()));
      ADD_FAILURE() << "a malformed chat_template.json was accepted";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find("chat_template.json"), std::string::npos) << e.what();
    }
  }
  {
    ScratchDir dir;
    dir.write("tokenizer_config.json", R"({"chat_template": 3})");
    try {
      Tokenizer::from_hf_json(dir.write("tokenizer.json", tiny_json().dump()));
      ADD_FAILURE() << "a number as chat_template was accepted";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find("chat_template must be a string or a list"), std::string::npos) << e.what();
    }
  }
}

TEST(TokenizerJson, TemplatePostProcessorImpliesBos) {
  json j = tiny_json();
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}},
        {{"type", "TemplateProcessing"},
         {"single",
          {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {0}}, {"tokens", {"<s>"}}}}}}}}}};
  ScratchDir dir;
  const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", j.dump()));
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos_id(), 0);
  EXPECT_FALSE(t.add_eos());
}

TEST(TokenizerJson, PrefixSpaceAndSplitPipeline) {
  json j = tiny_json();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"String", "|"}}}, {"behavior", "Removed"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}}}};
  ScratchDir dir;
  const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", j.dump()));
  // "world|hello" -> " world", " hello" (each piece gets its own prefix space).
  const auto ids = t.encode("world|hello", false);
  EXPECT_EQ(t.decode(ids), " world hello");
  EXPECT_EQ(ids.front(), t.token_id("Ġworld").value());
}

// Writes `j` (or raw text) as tokenizer.json and expects a LoadError whose
// message names the file and contains `expected`.
void expect_load_error(const std::string& contents, const std::string& expected, const std::string& config = "") {
  ScratchDir dir;
  if (!config.empty()) dir.write("tokenizer_config.json", config);
  const std::string path = dir.write("tokenizer.json", contents);
  try {
    Tokenizer::from_hf_json(path);
    ADD_FAILURE() << "expected a LoadError containing: " << expected;
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  }
}

json with(std::function<void(json&)> edit) {
  json j = tiny_json();
  edit(j);
  return j;
}

TEST(TokenizerJson, BadFilesAreLoadErrorsNamingFileAndProblem) {
  expect_load_error(with([](json& j) { j["model"].erase("vocab"); }).dump(), "model.vocab is missing");
  expect_load_error(with([](json& j) { j["model"]["merges"].push_back("h zz"); }).dump(),
                    "right token 'zz' is not in the vocabulary");
  expect_load_error(with([](json& j) {
                      j["pre_tokenizer"] = {{"type", "Whitespace"}};
                    }).dump(),
                    "pre_tokenizer type 'Whitespace' is not supported");
  expect_load_error(with([](json& j) {
                      j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Metaspace"}}}}};
                    }).dump(),
                    "pre_tokenizer.pretokenizers[0] type 'Metaspace' is not supported");
  expect_load_error(with([](json& j) {
                      j["pre_tokenizer"] = {{"type", "Sequence"},
                                            {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "ByteLevel"}}}}};
                    }).dump(),
                    "pre_tokenizer.pretokenizers[1]: a second ByteLevel pre-tokenizer is not supported");
  expect_load_error(with([](json& j) { j["pre_tokenizer"] = {{"type", "Digits"}}; }).dump(), "no ByteLevel step");
  expect_load_error(
      with([](json& j) {
        j["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", "(["}}}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}};
      }).dump(),
      "pattern '(['");
  expect_load_error(with([](json& j) {
                      j["normalizer"] = {{"type", "Lowercase"}};
                    }).dump(),
                    "normalizer type 'Lowercase' is not supported (supported: NFC, NFD, NFKC, NFKD, none)");
  expect_load_error(with([](json& j) {
                      j["decoder"] = {{"type", "Metaspace"}};
                    }).dump(),
                    "decoder type 'Metaspace' is not supported");
  expect_load_error(with([](json& j) { j["model"]["type"] = "Unigram"; }).dump(),
                    "model.type 'Unigram' is not supported");
  expect_load_error(with([](json& j) { j["model"]["vocab"]["hello"] = "x"; }).dump(),
                    "model.vocab[\"hello\"] must be an integer");
  expect_load_error(with([](json& j) { j["model"]["vocab"]["zzz"] = 1000000; }).dump(), "id 1000000 leaves holes");
  expect_load_error(with([](json& j) { j["added_tokens"][0]["single_word"] = true; }).dump(),
                    "sets single_word, which is not supported");
  expect_load_error(with([](json& j) {
                      json node = {{"type", "ByteLevel"}};
                      for (int i = 0; i < 40; ++i) {
                        node = {{"type", "Sequence"}, {"pretokenizers", json::array({node})}};
                      }
                      j["pre_tokenizer"] = node;
                    }).dump(),
                    "nested too deeply");
  expect_load_error("{\"model\": ", "invalid JSON");
  expect_load_error(tiny_json().dump(), "bos_token '<nope>' is not in the vocabulary", R"({"bos_token": "<nope>"})");
}

TEST(TokenizerJson, MissingFileIsALoadError) {
  ScratchDir dir;
  try {
    Tokenizer::from_hf_json(dir.file("absent.json"));
    FAIL() << "expected LoadError";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.json: cannot open"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nnsight
