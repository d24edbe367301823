// utf8_step / utf8_valid_prefix against hand-worked sequences and against a
// plain reference validator (decode the bits, re-encode, compare).
#include "core/tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace nnsight {
namespace {

Utf8Step step(const std::string& s) { return utf8_step(s); }

TEST(Utf8, ValidSequences) {
  EXPECT_EQ(step("A").status, Utf8Status::kValid);
  EXPECT_EQ(step("A").length, 1u);
  EXPECT_EQ(step("\xC3\xA9").length, 2u);                          // é
  EXPECT_EQ(step("\xE2\x82\xAC").length, 3u);                      // €
  EXPECT_EQ(step("\xF0\x9F\x90\x8D").length, 4u);                  // 🐍
  EXPECT_EQ(step("\xF4\x8F\xBF\xBF").status, Utf8Status::kValid);  // U+10FFFF
}

TEST(Utf8, IllFormedSequencesReportTheirMaximalSubpart) {
  // Examples worked from Unicode ch. 3, "U+FFFD Substitution of Maximal Subparts".
  struct Case {
    const char* bytes;
    Utf8Status status;
    size_t length;
  } cases[] = {
      {"\x80", Utf8Status::kInvalid, 1},              // stray continuation
      {"\xC0\xAF", Utf8Status::kInvalid, 1},          // overlong lead
      {"\xE0\x80\x80", Utf8Status::kInvalid, 1},      // overlong 3-byte
      {"\xED\xA0\x80", Utf8Status::kInvalid, 1},      // surrogate D800
      {"\xF4\x90\x80\x80", Utf8Status::kInvalid, 1},  // above U+10FFFF
      {"\xF5\x80", Utf8Status::kInvalid, 1},
      {"\xFF", Utf8Status::kInvalid, 1},
      {"\xE2\x82"
       "A",
       Utf8Status::kInvalid, 2},  // truncated, then ASCII
      {"\xF0\x9F\x90"
       "A",
       Utf8Status::kInvalid, 3},
      {"\xF0\x9F", Utf8Status::kIncomplete, 2},  // cut by the end of input
      {"\xE2", Utf8Status::kIncomplete, 1},
  };
  for (const Case& c : cases) {
    const Utf8Step s = step(c.bytes);
    EXPECT_EQ(s.status, c.status) << testing::PrintToString(std::string(c.bytes));
    EXPECT_EQ(s.length, c.length) << testing::PrintToString(std::string(c.bytes));
  }
}

TEST(Utf8, EncodeRoundTripsEveryScalarValue) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string e = utf8_encode(cp);
    const Utf8Step s = utf8_step(e);
    ASSERT_EQ(s.status, Utf8Status::kValid) << cp;
    ASSERT_EQ(s.length, e.size()) << cp;
  }
}

// Reference: the longest valid prefix by decoding each sequence's bits and
// accepting it only if it re-encodes to the same bytes (no overlongs) and is
// a scalar value.
size_t reference_valid_prefix(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) break;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = true;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 2) ok = false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) break;
    if (utf8_encode(cp) != s.substr(i, len)) break;  // overlong
    i += len;
  }
  return i;
}

TEST(Utf8, ValidPrefixMatchesReferenceOnRandomBytes) {
  std::mt19937 rng(7);
  // Bias towards bytes that start or continue multi-byte sequences.
  const unsigned char interesting[] = {0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                       0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5};
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) {
      s.push_back(
          static_cast<char>(rng() % 2 ? interesting[rng() % sizeof(interesting)] : static_cast<unsigned char>(rng())));
    }
    ASSERT_EQ(utf8_valid_prefix(s), reference_valid_prefix(s)) << testing::PrintToString(s);
  }
}

}  // namespace
}  // namespace nnsight
