// PreTokenizer: regex splitting, split behaviours, prefix spaces and
// ill-formed UTF-8, on hand-worked examples. (Agreement with Hugging Face
// `tokenizers` on real pipelines is checked by smollm2_tokenizer_test.cpp.)
#include "core/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <nnsight/error.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer_pipeline.h"

namespace nnsight {
namespace {

using Strings = std::vector<std::string>;

Strings pieces(const PreTokenizerConfig& config, const std::string& text) {
  const PreTokenizer pre(config);
  PreTokenizerScratch scratch;
  std::vector<Piece> out;
  pre.split(text, out, scratch);
  Strings result;
  for (const Piece& p : out) {
    result.push_back((p.space_prefix ? " " : "") + text.substr(p.begin, p.end - p.begin));
  }
  return result;
}

PreTokenizerConfig one(PreTokenizeStep step) { return PreTokenizerConfig{{std::move(step)}}; }

TEST(PreTokenizer, Gpt2Regex) {
  const auto config = TokenizerPipeline::for_pre_name("gpt2").pre_tokenizer;
  EXPECT_EQ(pieces(config, "Hello world's  123!!\n"), (Strings{"Hello", " world", "'s", " ", " 123", "!!", "\n"}));
  EXPECT_EQ(pieces(config, "   hello"), (Strings{"  ", " hello"}));
  EXPECT_EQ(pieces(config, ""), Strings{});
}

TEST(PreTokenizer, SmolLmSplitsEveryDigitFirst) {
  const auto config = TokenizerPipeline::for_pre_name("smollm").pre_tokenizer;
  EXPECT_EQ(pieces(config, "a12b 3.5"), (Strings{"a", "1", "2", "b", " ", "3", ".", "5"}));
}

TEST(PreTokenizer, LlamaCppDefaultAppliesFourRegexesInTurn) {
  const auto config = TokenizerPipeline::for_pre_name("default").pre_tokenizer;
  // punctuation runs | GPT-2 | digit runs | three ASCII digits
  EXPECT_EQ(pieces(config, "Hello,world 12345"), (Strings{"Hello", ",", "world", " ", "123", "45"}));
}

TEST(PreTokenizer, IllFormedUtf8BecomesPiecesOfItsOwn) {
  const auto config = TokenizerPipeline::for_pre_name("gpt2").pre_tokenizer;
  EXPECT_EQ(pieces(config,
                   "ab\xFF"
                   "cd"),
            (Strings{"ab", "\xFF", "cd"}));
  // A truncated sequence is one maximal subpart; the next byte starts afresh.
  EXPECT_EQ(pieces(config,
                   "x\xF0\x9F"
                   "y \xE2\x82"),
            (Strings{"x", "\xF0\x9F", "y", " ", "\xE2\x82"}));
}

TEST(PreTokenizer, PrefixSpaceIsVirtualAndKnownToLaterSteps) {
  PreTokenizerConfig config{{PreTokenizeStep::prefix_space(), PreTokenizeStep::split(kGpt2SplitPattern)}};
  EXPECT_EQ(pieces(config, "hello world"), (Strings{" hello", " world"}));
  EXPECT_EQ(pieces(config, " already"), (Strings{" already"}));
  // The added space alone is a piece when the regex cuts it off.
  EXPECT_EQ(pieces(config, "!x"), (Strings{" !", "x"}));
  const PreTokenizer pre(config);
  PreTokenizerScratch scratch;
  std::vector<Piece> out;
  pre.split("hello world", out, scratch);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].space_prefix);
  EXPECT_EQ(out[0].begin, 0u);
  EXPECT_EQ(out[0].end, 5u);
  EXPECT_FALSE(out[1].space_prefix);
  EXPECT_EQ(out[1].begin, 5u);
}

TEST(PreTokenizer, SplitBehaviours) {
  EXPECT_EQ(pieces(one(PreTokenizeStep::split(" ", SplitBehavior::kRemoved)), "a b  c"), (Strings{"a", "b", "c"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split_literal(",", SplitBehavior::kMergedWithPrevious, false)), "a,b,,c"),
            (Strings{"a,", "b,", ",", "c"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split_literal(",", SplitBehavior::kMergedWithNext, false)), "a,b,,c"),
            (Strings{"a", ",b", ",", ",c"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split(R"(\p{L})", SplitBehavior::kContiguous, true)), "ab1 c"),
            (Strings{"ab", "1 ", "c"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split(R"(\p{L})", SplitBehavior::kIsolated, true)), "ab1 c"),
            (Strings{"a", "b", "1 ", "c"}));
  // A literal pattern's regex metacharacters are plain text.
  EXPECT_EQ(pieces(one(PreTokenizeStep::split_literal(".*", SplitBehavior::kIsolated, false)), "a.*b"),
            (Strings{"a", ".*", "b"}));
}

TEST(PreTokenizer, EmptyMatchesCutAsInHuggingFace) {
  // Hugging Face (Oniguruma's match iterator) keeps an empty match unless it
  // touches the end of the previous match; each kept one cuts the text.
  EXPECT_EQ(pieces(one(PreTokenizeStep::split("x*")), "abc"), (Strings{"a", "b", "c"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split("x*")), "axxb"), (Strings{"a", "xx", "b"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split("x*", SplitBehavior::kMergedWithPrevious)), "axxb"),
            (Strings{"axx", "b"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split("x*", SplitBehavior::kMergedWithNext)), "axxb"), (Strings{"a", "xxb"}));
  EXPECT_EQ(pieces(one(PreTokenizeStep::split("x*", SplitBehavior::kRemoved)), "axxb"), (Strings{"a", "b"}));
  // SuperBPE's lookahead groups digits in threes from the right.
  EXPECT_EQ(pieces(one(PreTokenizeStep::split(R"((?=(\d{3})+(?!\d)))")), "1234567"), (Strings{"1", "234", "567"}));
}

TEST(PreTokenizer, StepAfterByteLevelSeesTheByteAlphabet) {
  // "в" is D0 B2; byte B2 is spelled "²", a digit, in the byte alphabet (as
  // Falcon's Digits step after ByteLevel sees it).
  PreTokenizeStep digits = PreTokenizeStep::split(R"(\p{N}+)");
  EXPECT_EQ(pieces(one(digits), "в1"), (Strings{"в", "1"}));
  digits.byte_level_view = true;
  EXPECT_EQ(pieces(one(digits), "в1"), (Strings{"\xD0",
                                                "\xB2"
                                                "1"}));
}

TEST(PreTokenizer, EveryLlamaCppNameCompiles) {
  const std::vector<std::string> names = TokenizerPipeline::known_pre_names();
  EXPECT_GE(names.size(), 80u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const TokenizerPipeline p = TokenizerPipeline::for_pre_name(name);
    EXPECT_FALSE(p.pre_tokenizer.steps.empty());
    const PreTokenizer pre(p.pre_tokenizer);  // throws if a pattern does not compile
    PreTokenizerScratch scratch;
    std::vector<Piece> out;
    pre.split("Hello world 123 日本語", out, scratch);
    EXPECT_GE(out.size(), 3u);
  }
}

TEST(PreTokenizer, LongWhitespaceRunDoesNotExhaustTheMatcher) {
  const auto config = TokenizerPipeline::for_pre_name("llama-bpe").pre_tokenizer;
  const std::string text = "x" + std::string(1 << 20, ' ') + "y" + std::string(1 << 18, '\n');
  const Strings got = pieces(config, text);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], "x");
  EXPECT_EQ(got[1].size(), size_t(1 << 20) - 1);
  EXPECT_EQ(got[2], " y");
  EXPECT_EQ(got[3].size(), size_t(1 << 18));
}

TEST(PreTokenizer, BadPatternIsALoadErrorNamingIt) {
  try {
    PreTokenizer pre(one(PreTokenizeStep::split("ab(c")));
    FAIL() << "expected LoadError";
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'ab(c'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("offset 4"), std::string::npos) << msg;
  }
}

TEST(PreTokenizer, UnknownPreNameIsALoadError) {
  try {
    TokenizerPipeline::for_pre_name("no-such-pre");
    FAIL() << "expected LoadError";
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'no-such-pre'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("known: gpt2, gpt-2,"), std::string::npos) << msg;
    EXPECT_NE(msg.find("deepseek-coder"), std::string::npos) << msg;
  }
  try {
    TokenizerPipeline::for_pre_name("gemma4");
    FAIL() << "expected LoadError";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("'gemma4' is not supported: SentencePiece-style"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(TokenizerPipeline::for_pre_name("tekken").ignore_merges);
  EXPECT_EQ(TokenizerPipeline::for_pre_name("qwen2").normalization, UnicodeNormalization::kNfc);
  EXPECT_EQ(TokenizerPipeline::for_pre_name("gpt-2").normalization, UnicodeNormalization::kNone);
  EXPECT_TRUE(TokenizerPipeline::for_pre_name("llama-bpe").ignore_merges);
  EXPECT_FALSE(TokenizerPipeline::for_pre_name("qwen2").ignore_merges);
}

}  // namespace
}  // namespace nnsight
