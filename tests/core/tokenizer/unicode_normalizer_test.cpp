// unicode_normalize: the four Unicode normal forms on UTF-8 that may hold
// ill-formed bytes.
#include "core/tokenizer/unicode_normalizer.h"

#include <gtest/gtest.h>

#include <string>

namespace nnsight {
namespace {

std::string normalized(const std::string& text, UnicodeNormalization form) {
  std::string out = "stale";
  return unicode_normalize(text, form, out) ? out : text;
}

TEST(UnicodeNormalizer, FourForms) {
  const std::string decomposed = "e\xCC\x81";  // e + U+0301
  const std::string composed = "\xC3\xA9";     // U+00E9
  EXPECT_EQ(normalized(decomposed, UnicodeNormalization::kNfc), composed);
  EXPECT_EQ(normalized(composed, UnicodeNormalization::kNfd), decomposed);
  // U+212B ANGSTROM SIGN is canonically U+00C5; U+FB01 "fi" only by compatibility.
  EXPECT_EQ(normalized("\xE2\x84\xAB", UnicodeNormalization::kNfc), "\xC3\x85");
  EXPECT_EQ(normalized("\xEF\xAC\x81", UnicodeNormalization::kNfc), "\xEF\xAC\x81");
  EXPECT_EQ(normalized("\xEF\xAC\x81", UnicodeNormalization::kNfkc), "fi");
  EXPECT_EQ(normalized("\xC2\xBD", UnicodeNormalization::kNfkd),
            "1\xE2\x81\x84"
            "2");  // 1/2 with U+2044
  EXPECT_EQ(normalized(decomposed, UnicodeNormalization::kNone), decomposed);
}

TEST(UnicodeNormalizer, TextBelowCombiningMarksIsNotCopied) {
  std::string out = "untouched";
  EXPECT_FALSE(unicode_normalize("plain ASCII and caf\xC3\xA9", UnicodeNormalization::kNfc, out));
  EXPECT_EQ(out, "untouched");
  EXPECT_TRUE(unicode_normalize("\xE6\x97\xA5", UnicodeNormalization::kNfc, out));  // U+65E5, unchanged
  EXPECT_EQ(out, "\xE6\x97\xA5");
}

TEST(UnicodeNormalizer, IllFormedBytesStayBetweenNormalizedRuns) {
  const std::string text =
      "e\xCC\x81\xFF"
      "a\xCC\x88\xE2\x82";  // ... 0xFF ... and a cut-off 3-byte sequence
  EXPECT_EQ(normalized(text, UnicodeNormalization::kNfc), "\xC3\xA9\xFF\xC3\xA4\xE2\x82");
  // A combining mark after an ill-formed byte does not reach back across it.
  EXPECT_EQ(normalized("e\xFF\xCC\x81", UnicodeNormalization::kNfc), "e\xFF\xCC\x81");
}

TEST(UnicodeNormalizer, Names) {
  EXPECT_STREQ(unicode_normalization_name(UnicodeNormalization::kNfc), "NFC");
  EXPECT_STREQ(unicode_normalization_name(UnicodeNormalization::kNone), "none");
}

}  // namespace
}  // namespace nnsight
