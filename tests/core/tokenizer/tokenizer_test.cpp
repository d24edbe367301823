// Tokenizer on the hand-made tiny_spec() vocabulary: merge order, fallback to
// byte tokens, special-token splitting, BOS/EOS, decode, spec validation.
#include "core/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <nnsight/error.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/tokenizer/byte_level.h"
#include "support/tiny_tokenizer_spec.h"

namespace nnsight {
namespace {

using testing::tiny_byte_id;
using testing::tiny_spec;
using Ids = std::vector<int32_t>;

int32_t id(const Tokenizer& t, const std::string& token) {
  auto v = t.token_id(token);
  EXPECT_TRUE(v.has_value()) << token;
  return v.value_or(-1);
}

TEST(Tokenizer, MergesInRankOrder) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(t.encode("hello world", false), (Ids{id(t, "hello"), id(t, "Ġworld")}));
  // "b c" has a better rank than "a b".
  EXPECT_EQ(t.encode("abc", false), (Ids{tiny_byte_id('a'), id(t, "bc")}));
  // Equal ranks merge leftmost first: a a | a a | a, then aa aa.
  EXPECT_EQ(t.encode("aaaaa", false), (Ids{id(t, "aaaa"), tiny_byte_id('a')}));
  EXPECT_EQ(t.encode("aaa", false), (Ids{id(t, "aa"), tiny_byte_id('a')}));
}

TEST(Tokenizer, FallsBackToByteTokens) {
  const Tokenizer t(tiny_spec());
  // No merges cover these: one token per byte, including each byte of "é".
  EXPECT_EQ(t.encode("é!", false), (Ids{tiny_byte_id(0xC3), tiny_byte_id(0xA9), tiny_byte_id('!')}));
  // " hellx": the regex keeps " hellx" whole; merges reach "hell" but not " hell".
  EXPECT_EQ(t.encode(" hellx", false), (Ids{tiny_byte_id(' '), id(t, "hell"), tiny_byte_id('x')}));
  const std::string with_nul("a\0b", 3);
  EXPECT_EQ(t.encode(with_nul, false), (Ids{tiny_byte_id('a'), tiny_byte_id(0), tiny_byte_id('b')}));
}

TEST(Tokenizer, SpecialTokensAreMatchedWholeLongestFirst) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(t.encode("<|im_start|>hello</s>", false), (Ids{2, id(t, "hello"), 1}));
  // "<tool_call>" wins over its prefix "<tool>".
  EXPECT_EQ(t.encode("<tool_call><tool>", false), (Ids{4, 3}));
  // Near misses are ordinary text.
  const Ids near = t.encode("<tool", false);
  EXPECT_EQ(near.size(), 5u);
  EXPECT_EQ(t.decode(near), "<tool");
  // Specials are matched whatever add_special_tokens says; it only adds BOS/EOS.
  EXPECT_EQ(t.encode("<s>", true), (Ids{0, 0}));
}

TEST(Tokenizer, BosAndEos) {
  TokenizerSpec spec = tiny_spec();
  spec.add_eos = true;
  const Tokenizer t(spec);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos_id(), 0);
  EXPECT_EQ(t.eos_id(), 1);
  EXPECT_EQ(t.encode("hello"), (Ids{0, id(t, "hello"), 1}));
  EXPECT_EQ(t.encode("hello", false), (Ids{id(t, "hello")}));
  EXPECT_EQ(t.encode(""), (Ids{0, 1}));
}

TEST(Tokenizer, DecodeGivesExactBytes) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(t.decode({0, id(t, "hello"), id(t, "Ġworld"), 1}), "<s>hello world</s>");
  EXPECT_EQ(t.decode({0, id(t, "hello"), 3, 1}, true), "hello<tool>")
      << "control tokens are skipped, user-defined ones are text";
  EXPECT_TRUE(t.is_special(0));
  EXPECT_FALSE(t.is_special(3));
  EXPECT_FALSE(t.is_special(-1));
  EXPECT_EQ(t.token_bytes(id(t, "Ġworld")), " world");
  EXPECT_EQ(t.token_string(id(t, "Ġworld")), "Ġworld");
  EXPECT_EQ(t.decode({tiny_byte_id(0xF0)}), "\xF0");  // half a character stays half
  EXPECT_THROW(t.decode({static_cast<int32_t>(t.vocab_size())}), Error);
  EXPECT_THROW(t.decode({-1}), Error);
  EXPECT_THROW(t.token_bytes(1 << 30), Error);
  EXPECT_FALSE(t.token_id("Ġnope").has_value());
  EXPECT_EQ(t.vocab_size(), 5 + 256 + 13);
}

TEST(Tokenizer, RoundTripsRandomBytes) {
  const Tokenizer t(tiny_spec());
  std::mt19937 rng(99);
  const std::string pieces[] = {"hello", " world", "<s>", "<tool", "aa", "\xF0\x9F\x90\x8D", " "};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) {
      if (rng() % 3 == 0) {
        s += pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
      } else {
        s.push_back(static_cast<char>(rng()));
      }
    }
    ASSERT_EQ(t.decode(t.encode(s, false)), s) << ::testing::PrintToString(s);
  }
}

TEST(Tokenizer, CopiesShareTablesAndEncodeTheSame) {
  const Tokenizer t(tiny_spec());
  const Tokenizer copy = t;
  EXPECT_EQ(copy.encode("hello world hello"), t.encode("hello world hello"));
}

// ---- validation ----

std::string load_error(TokenizerSpec spec) {
  try {
    Tokenizer t(std::move(spec));
  } catch (const LoadError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Tokenizer, RejectsBadSpecs) {
  auto contains = [](const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; };
  {
    TokenizerSpec s = tiny_spec();
    s.merges.push_back("hello");
    const std::string msg = load_error(s);
    EXPECT_TRUE(contains(msg, "merge #13 'hello'") && contains(msg, "left right")) << msg;
  }
  {
    TokenizerSpec s = tiny_spec();
    s.merges.push_back("h zz");
    const std::string msg = load_error(s);
    EXPECT_TRUE(contains(msg, "right token 'zz' is not in the vocabulary")) << msg;
  }
  {
    TokenizerSpec s = tiny_spec();
    s.merges.push_back("h l");  // "hl" is not a token
    const std::string msg = load_error(s);
    EXPECT_TRUE(contains(msg, "merged token 'hl'")) << msg;
  }
  {
    TokenizerSpec s = tiny_spec();
    s.token_types.pop_back();
    EXPECT_TRUE(contains(load_error(s), "token_types has 273 entries")) << load_error(s);
  }
  {
    TokenizerSpec s = tiny_spec();
    s.token_types[7] = 9;
    EXPECT_TRUE(contains(load_error(s), "unknown token type 9")) << load_error(s);
  }
  {
    TokenizerSpec s = tiny_spec();
    s.eos_id = 100000;
    EXPECT_TRUE(contains(load_error(s), "eos_id 100000")) << load_error(s);
  }
  {
    TokenizerSpec s = tiny_spec();
    s.bos_id = -1;
    EXPECT_TRUE(contains(load_error(s), "add_bos is set")) << load_error(s);
  }
  {
    TokenizerSpec s = tiny_spec();
    s.pre = "mystery";
    EXPECT_TRUE(contains(load_error(s), "'mystery'")) << load_error(s);
  }
  {
    TokenizerSpec s;
    EXPECT_TRUE(contains(load_error(s), "vocabulary is empty")) << load_error(s);
  }
}

TEST(Tokenizer, MissingByteTokenWithoutUnkFailsOnlyWhenUsed) {
  TokenizerSpec s = tiny_spec();
  s.tokens[size_t(tiny_byte_id('q'))] = "QQ";  // byte 'q' loses its token
  const Tokenizer t(s);
  EXPECT_EQ(t.encode("hello", false).size(), 1u);
  EXPECT_THROW(t.encode("q", false), Error);
  s.unk_id = 1;
  const Tokenizer with_unk(s);
  EXPECT_EQ(with_unk.encode("q", false), (Ids{1}));
}

}  // namespace
}  // namespace nnsight
