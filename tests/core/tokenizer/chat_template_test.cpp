// ChatTemplate against transformers' own renders: the real chat templates of
// the supported families (tests/data/chat/<family>.jinja) rendered for every
// message list of tests/data/chat/cases.json must equal, byte for byte, what
// apply_chat_template(tokenize=False) wrote (scripts/make-chat-fixtures), or
// raise the same raise_exception() message. Then the error paths, and the
// default model's own template read from its GGUF file.
#include "core/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_loader.h"
#include "support/real_model.h"

namespace nnsight {
namespace {

using json = nlohmann::json;

const std::string kChatDir = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/chat/";

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

std::string read_or_fail(const std::string& path) {
  std::string text;
  EXPECT_TRUE(read_file(path, text)) << "cannot open " << path;
  return text;
}

const json& cases() {
  static const json spec = json::parse(read_or_fail(kChatDir + "cases.json"));
  return spec;
}

std::vector<ChatMessage> messages_of(const json& c) {
  std::vector<ChatMessage> out;
  for (const json& m : c["messages"]) out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

// The ConfigError message of `f`, or "" when it does not throw one.
template <typename F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

class ChatTemplateFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixture, RendersAsTransformers) {
  const std::string family = GetParam();
  const json& tokens = cases()["families"][family];
  const ChatTemplate tmpl(read_or_fail(kChatDir + family + ".jinja"));
  int checked = 0;
  for (const json& c : cases()["cases"]) {
    const std::string name = family + "." + c["name"].get<std::string>();
    std::string want, want_error;
    const bool renders = read_file(kChatDir + name + ".txt", want);
    ASSERT_TRUE(renders || read_file(kChatDir + name + ".error.txt", want_error)) << "no fixture for " << name;
    auto render = [&] {
      return tmpl.render(messages_of(c), c["add_generation_prompt"].get<bool>(), tokens["bos_token"],
                         tokens["eos_token"]);
    };
    if (renders) {
      std::string got;
      EXPECT_NO_THROW(got = render()) << name;
      EXPECT_EQ(got, want) << name;
    } else {
      EXPECT_EQ(config_error(render), "chat template: " + want_error) << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 11);
}

INSTANTIATE_TEST_SUITE_P(Families, ChatTemplateFixture,
                         ::testing::Values("smollm2", "llama3", "qwen3", "gemma2", "gemma3", "phi3", "mistral",
                                           "mixtral", "olmo2", "llama2", "tinyllama"));

TEST(ChatTemplate, GemmaRefusesASystemRoleAndBadOrderWithTheTemplatesMessage) {
  // The fixtures hold these; checked here by name so a regenerated fixture cannot hide them.
  const ChatTemplate gemma2(read_or_fail(kChatDir + "gemma2.jinja"));
  EXPECT_EQ(config_error([&] {
              gemma2.render({{"system", "s"}, {"user", "u"}}, true, "<bos>", "<eos>");
            }),
            "chat template: System role not supported");
  const ChatTemplate gemma3(read_or_fail(kChatDir + "gemma3.jinja"));
  EXPECT_EQ(config_error([&] {
              gemma3.render({{"user", "a"}, {"user", "b"}}, true, "<bos>", "<eos>");
            }),
            "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
  // Gemma 3 folds the system message into the first user turn.
  EXPECT_EQ(gemma3.render({{"system", "Be brief."}, {"user", "Hi"}}, true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, UnsupportedConstructsNameThemselvesAndTheirLineAndColumn) {
  struct Case {
    const char* source;
    const char* message;
  };
  const Case kCases[] = {
      {"{% macro f() %}x{% endmacro %}", "chat template 1:4: unsupported statement 'macro'"},
      {"ab\n  {{ x | wordcount }}", "chat template 2:10: unsupported filter 'wordcount'"},
      {"{{ x.format(1) }}", "chat template 1:6: unsupported method 'format()'"},
      {"{% if x is callable %}{% endif %}", "chat template 1:12: unsupported test 'callable'"},
      {"{{ cycler(1) }}", "chat template 1:4: unsupported function 'cycler()'"},
      {"{% for x in y if x %}{% endfor %}", "chat template 1:15: unsupported construct: a loop filter"},
      {"{% set a, b = 1, 2 %}", "chat template 1:9: unsupported construct: assigning several variables"},
      {"{% set x %}y{% endset %}", "chat template 1:4: unsupported construct: block assignment"},
      {"\n\n{% raw %}{{ x }}{% endraw %}", "chat template 3:4: unsupported statement 'raw'"},
      {"{% if a < b < c %}{% endif %}", "chat template 1:7: unsupported construct: chained comparison"},
      {"{% include 'other.jinja' %}", "chat template 1:4: unsupported statement 'include'"},
      {"{% if x %}never closed", "chat template 1:4: this statement is never closed"},
      {"{{ 'unterminated }}", "chat template 1:4: unterminated string literal"},
      {"{{ x ", "chat template 1:1: unclosed tag"},
      {"{% endfor %}", "chat template 1:4: 'endfor' without a matching opening statement"},
      {"{% break %}", "chat template 1:4: 'break' outside a for loop"},
      {"{{ x ? y }}", "chat template 1:6: unexpected character '?'"},
  };
  for (const Case& c : kCases) {
    const std::string error = config_error([&] { ChatTemplate t(c.source); });
    EXPECT_EQ(error.rfind(c.message, 0), 0u) << c.source << "\n  got: " << error;
  }
}

TEST(ChatTemplate, EvaluationErrorsNameTheirLineAndColumn) {
  auto error_of = [](const char* source) {
    const ChatTemplate t(source);
    return config_error([&] { t.render({{"user", "hi"}}, true, "<s>", "</s>"); });
  };
  EXPECT_EQ(error_of("{{ messages[0].nothing.deeper }}"), "chat template 1:16: 'messages[0].nothing' is undefined");
  EXPECT_EQ(error_of("\n{{ 1 + 'a' }}"), "chat template 2:4: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{{ raise_exception('Only user roles: ' ~ messages[0].role) }}"),
            "chat template: Only user roles: user");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "chat template 1:4: integer division or modulo by zero");
}

TEST(ChatTemplate, HostileTemplatesStopWithAnError) {
  auto error_of = [](const std::string& source) {
    std::string error = config_error([&] {
      const ChatTemplate t(source);
      t.render({{"user", "hi"}}, true, "<s>", "</s>");
    });
    return error;
  };
  // Loops that would run for ever, output and strings that double without end.
  EXPECT_NE(error_of("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
                     "{% endfor %}{% endfor %}{% endfor %}")
                .find("loops stopped after 1000000 iterations"),
            std::string::npos);
  EXPECT_NE(error_of("{% for a in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}").find("supported"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}"
                     "{% endfor %}{{ ns.s }}")
                .find("bytes is more than the"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000000 }}").find("bytes is more than the"), std::string::npos);
  EXPECT_NE(error_of("{{ range(100000000000) }}").find("range() of more than"), std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 100 }}").find("integer overflow"), std::string::npos);
  // Nesting deep enough to overflow a recursive parser's stack.
  EXPECT_NE(
      error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").find("nested too deeply"),
      std::string::npos);
  EXPECT_NE(error_of(std::string(100000, '{') + std::string(100000, '}')).find("chat template"), std::string::npos);
  EXPECT_NE(error_of(std::string(2 << 20, 'x')).find("bytes is more than"), std::string::npos);
  // Arbitrary bytes never crash: each either renders or is a ConfigError.
  std::string noise;
  uint32_t state = 12345;
  for (int k = 0; k < 2000; ++k) {
    state = state * 1664525u + 1013904223u;
    static const char kAlphabet[] = "{}%#-+()[]'\". |=~xy0ifendforsetinnot\n";
    noise += kAlphabet[(state >> 16) % (sizeof kAlphabet - 1)];
    if (k % 50 == 49) {
      try {
        const ChatTemplate t(noise);
        (void)t.render({{"user", "hi"}}, true, "<s>", "</s>");
      } catch (const ConfigError&) {
      }
    }
  }
}

TEST(ChatTemplate, JinjaWhitespaceAndScopingAsTransformersConfiguresIt) {
  auto render = [](const std::string& source) { return ChatTemplate(source).render({}, false, "", ""); };
  // trim_blocks, lstrip_blocks, "-" and "+", comments, the last newline dropped.
  EXPECT_EQ(render("a  \n  {% if true %}\n  b {{ 1 }}  \n  {% endif %}  \nc {# hi #}\n d"), "a  \n  b 1  \n  \nc  d");
  EXPECT_EQ(render("x {{- ' y ' -}} z\n"), "x y z");
  EXPECT_EQ(render("  {%+ if true %}k{% endif %}"), "  k");
  // A set inside a loop lives for one iteration; namespace attributes outlive it.
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}"), "01020");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}"
                   "{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}"
                   "{% endif %}{{ i }}{{ ',' if not loop.last }}{% endfor %}"),
            "0,2,");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ '  x y '.split() }} {{ 'abc'[::-1] }} {{ [1,2,3][1:] }}"),
            "['a', 'b', '', 'c'] ['x', 'y'] cba [2, 3]");
  EXPECT_EQ(render("{{ {'a': [1, 2.5, none, true, 'q\"']} | tojson }}|{{ [1, {'k': 'v'}] | tojson(indent=2) }}"),
            "{\"a\": [1, 2.5, null, true, \"q\\\"\"]}|[\n  1,\n  {\n    \"k\": \"v\"\n  }\n]");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 3 }} {{ 1 ~ none }}"),
            "3 -4 2 3.5 2.0 8 1None");
  EXPECT_EQ(render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ x | length }} [{{ x }}] "
                   "{{ 'é' | length }} {{ '\\u00e9' == 'é' }}"),
            "False True True 0 [] 1 True");
}

TEST(ChatTemplate, CopiesShareTheParsedTemplate) {
  const ChatTemplate a(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m['content'] }}]{% endfor %}"
      "{% if add_generation_prompt %}>{% endif %}{{ eos_token }}");
  const ChatTemplate b = a;  // NOLINT(performance-unnecessary-copy-initialization): copies are what is tested
  EXPECT_EQ(b.render({{"user", "q"}, {"assistant", "a"}}, true, "<s>", "</s>"), "<s>[user:q][assistant:a]></s>");
  EXPECT_EQ(a.source(), b.source());
}

// The default model's GGUF carries its template (tokenizer.chat_template):
// ChatML, which the tokenizer reads and ChatTemplate renders.
TEST(RealModelChatTemplate, DefaultModelTemplateRendersChatML) {
  const Tokenizer tok = load_tokenizer_for_model(testing::default_model_path());
  ASSERT_FALSE(tok.chat_template().empty());
  std::string committed;
  ASSERT_TRUE(read_file(kChatDir + "smollm2.jinja", committed));
  EXPECT_EQ(tok.chat_template(), committed);
  EXPECT_EQ(tok.bos_token(), "<|im_start|>");
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  const ChatTemplate tmpl(tok.chat_template());
  const std::string text =
      tmpl.render({{"user", "What is the capital of France?"}}, true, tok.bos_token(), tok.eos_token());
  EXPECT_EQ(text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n");
  // The turn markers are single special tokens when the text is tokenized.
  const std::vector<int32_t> ids = tok.encode(text, false);
  EXPECT_EQ(ids.front(), *tok.token_id("<|im_start|>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok.token_id("<|im_end|>")), 2);
}

}  // namespace
}  // namespace nnsight
