// StreamDecoder on tiny_spec(): characters split over tokens are held back
// until complete; ill-formed bytes become U+FFFD; output joins to decode().
#include "core/tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include <nnsight/error.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/tokenizer/utf8.h"
#include "support/tiny_tokenizer_spec.h"

namespace nnsight {
namespace {

using testing::tiny_byte_id;
using testing::tiny_spec;

const std::string kFffd = "\xEF\xBF\xBD";

TEST(StreamDecoder, HoldsAnEmojiUntilItsLastByte) {
  const Tokenizer t(tiny_spec());
  const std::string snake = "\xF0\x9F\x90\x8D";
  const std::vector<int32_t> ids = t.encode("a" + snake + "b", false);
  ASSERT_EQ(ids.size(), 6u);  // a, four byte tokens, b
  StreamDecoder d(t);
  std::vector<std::string> outs;
  for (int32_t id : ids) outs.push_back(d.push(id));
  EXPECT_EQ(outs, (std::vector<std::string>{"a", "", "", "", snake, "b"}));
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, JoinedOutputEqualsDecodeForValidText) {
  const Tokenizer t(tiny_spec());
  std::mt19937 rng(5);
  const std::string parts[] = {"hello", " world", "é", "日本", "\xF0\x9F\x90\x8D", "<s>", " ", "aa"};
  for (int iter = 0; iter < 500; ++iter) {
    std::string s;
    for (int k = static_cast<int>(rng() % 12); k > 0; --k) s += parts[rng() % 8];
    const std::vector<int32_t> ids = t.encode(s, true);
    for (bool skip : {false, true}) {
      StreamDecoder d(t, skip);
      std::string joined;
      for (int32_t id : ids) {
        const std::string piece = d.push(id);
        // Every piece handed out is whole, well-formed characters.
        ASSERT_EQ(utf8_valid_prefix(piece), piece.size()) << s;
        joined += piece;
      }
      joined += d.flush();
      ASSERT_EQ(joined, t.decode(ids, skip)) << s;
    }
  }
}

TEST(StreamDecoder, IllFormedBytesBecomeReplacementCharacters) {
  const Tokenizer t(tiny_spec());
  StreamDecoder d(t);
  EXPECT_EQ(d.push(tiny_byte_id(0xF0)), "");
  EXPECT_EQ(d.push(tiny_byte_id(0x9F)), "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  // 'A' cannot continue F0 9F: the held bytes are one maximal subpart.
  EXPECT_EQ(d.push(tiny_byte_id('A')), kFffd + "A");
  EXPECT_EQ(d.push(tiny_byte_id(0xFF)), kFffd);  // never valid: emitted at once
  EXPECT_EQ(d.push(tiny_byte_id(0xE2)), "");
  EXPECT_EQ(d.flush(), kFffd);  // an unfinished character at the end
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.push(tiny_byte_id('z')), "z");  // usable again after flush
}

TEST(StreamDecoder, BadIdThrowsAndLeavesStateAlone) {
  const Tokenizer t(tiny_spec());
  StreamDecoder d(t);
  EXPECT_EQ(d.push(tiny_byte_id(0xC3)), "");
  EXPECT_THROW(d.push(static_cast<int32_t>(t.vocab_size())), Error);
  EXPECT_EQ(d.push(tiny_byte_id(0xA9)), "\xC3\xA9");
}

}  // namespace
}  // namespace nnsight
