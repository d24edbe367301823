// onig_to_pcre2: the escapes whose meaning differs between Oniguruma and
// PCRE2 are rewritten; everything else is copied.
#include "core/tokenizer/onig_compat.h"

#include <gtest/gtest.h>

#include "core/tokenizer/pre_tokenizer.h"

namespace nnsight {
namespace {

const std::string kWs = R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

TEST(OnigCompat, RewritesWhitespaceAndHexEscapes) {
  EXPECT_EQ(onig_to_pcre2(R"(\s+(?!\S))"), "[" + kWs + "]+(?![^" + kWs + "])");
  EXPECT_EQ(onig_to_pcre2(R"([^\s\p{L}])"), "[^" + kWs + R"(\p{L}])");
  EXPECT_EQ(onig_to_pcre2(R"(\h\H[\h])"), "[0-9A-Fa-f][^0-9A-Fa-f][0-9A-Fa-f]");
}

TEST(OnigCompat, CopiesEverythingElse) {
  for (const char* p : {R"('s|'t| ?\p{L}+| ?\p{N}{1,3})", R"(\\s)", R"(\Q\s\E)", R"([]\s])", R"([[:alpha:]\d])",
                        R"((?i:'s|'t)\w+\b)"}) {
    const std::string got = onig_to_pcre2(p);
    if (std::string(p) == R"([]\s])") {
      EXPECT_EQ(got, "[]" + kWs + "]");  // ']' first in a class is a member
    } else {
      EXPECT_EQ(got, p);
    }
  }
}

TEST(OnigCompat, ScriptsMeanTheScriptProperty) {
  EXPECT_EQ(onig_to_pcre2(R"([\p{Han}]+|\P{Latin}|\p{^Greek}|\p{L}\p{Lu}\p{N})"),
            R"([\p{sc:Han}]+|\P{sc:Latin}|\p{^sc:Greek}|\p{L}\p{Lu}\p{N})");
  // U+3002 "。" is Common, though its Script_Extensions include Han.
  PreTokenizer pre(PreTokenizerConfig{{PreTokenizeStep::split(R"(\p{Han}+)")}});
  PreTokenizerScratch scratch;
  std::vector<Piece> out;
  pre.split("\xE4\xB8\xAD\xE3\x80\x82", out, scratch);  // 中。
  EXPECT_EQ(out.size(), 2u);
}

TEST(OnigCompat, NestedSetsAreFlattened) {
  // BLOOM's pattern: Oniguruma reads the inner [...] as a union.
  EXPECT_EQ(onig_to_pcre2(R"( ?[^(\s|[.,!?])]+)"), " ?[^(" + kWs + "|.,!?)]+");
  EXPECT_EQ(onig_to_pcre2(R"([a[]b]c])"), R"([a\]bc])");
}

TEST(OnigCompat, MongolianVowelSeparatorIsNotWhitespace) {
  // U+180E is White_Space in PCRE2's \s but not in Oniguruma's (or Unicode's).
  PreTokenizer pre(PreTokenizerConfig{{PreTokenizeStep::split(R"(\s+)")}});
  PreTokenizerScratch scratch;
  std::vector<Piece> out;
  const std::string text =
      "a\xE1\xA0\x8E"
      "b\xE3\x80\x80"
      "c";  // a U+180E b U+3000 c
  pre.split(text, out, scratch);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(text.substr(out[0].begin, out[0].end - out[0].begin),
            "a\xE1\xA0\x8E"
            "b");
  EXPECT_EQ(text.substr(out[1].begin, out[1].end - out[1].begin), "\xE3\x80\x80");
}

}  // namespace
}  // namespace nnsight
