// The GPT-2 byte alphabet, checked against the facts that define it.
#include "core/tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

namespace nnsight {
namespace {

TEST(ByteLevel, PrintableBytesStandForThemselvesOthersMapAboveLatin1) {
  std::set<uint32_t> seen;
  uint32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cp = byte_level_code_point(static_cast<uint8_t>(b));
    if (printable) {
      EXPECT_EQ(cp, static_cast<uint32_t>(b));
    } else {
      EXPECT_EQ(cp, next_extra++) << b;  // the others take U+0100.. in byte order
    }
    EXPECT_EQ(byte_level_byte(cp), b);
    seen.insert(cp);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(next_extra, 0x144u);
  EXPECT_EQ(byte_level_encode(" "), "Ġ");   // U+0120
  EXPECT_EQ(byte_level_encode("\n"), "Ċ");  // U+010A
  EXPECT_EQ(byte_level_byte(0x144), -1);
  EXPECT_EQ(byte_level_byte('A' + 0x10000), -1);
}

TEST(ByteLevel, EncodeDecodeRoundTripsAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(byte_level_decode(byte_level_encode(all), &back));
  EXPECT_EQ(back, all);
  ASSERT_TRUE(byte_level_decode("Ġthe", &back));
  EXPECT_EQ(back, " the");
}

TEST(ByteLevel, DecodeRejectsTextOutsideTheAlphabet) {
  std::string out;
  EXPECT_FALSE(byte_level_decode("\xC5\x84", &out));  // U+0144, first code point past the map
  EXPECT_FALSE(byte_level_decode("日本", &out));
  EXPECT_FALSE(byte_level_decode(" the", &out));  // a literal space is not in the alphabet
  EXPECT_FALSE(byte_level_decode("\xC3", &out));  // truncated UTF-8
}

}  // namespace
}  // namespace nnsight
