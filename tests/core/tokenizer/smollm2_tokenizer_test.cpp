// The SmolLM2 vocabulary (dumped from the default GGUF model into
// tests/data/tokenizer/smollm2/ by tests/data/tokenizer/make_golden.py)
// against token ids produced by Hugging Face `tokenizers` for the same
// vocabulary: SmolLM2's own pipeline, the other llama.cpp-named pipelines, and
// tokenizer.json-only pipelines (prefix space, split behaviours).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/stream_decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_json.h"
#include "core/tokenizer/utf8.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kDataDir = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/tokenizer";
const std::string kTokenizerJson = kDataDir + "/smollm2/tokenizer.json";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const json& golden() {
  static const json g = json::parse(read_file(kDataDir + "/golden.json"));
  return g;
}

const Tokenizer& smollm2() {
  static const Tokenizer t = Tokenizer::from_hf_json(kTokenizerJson);
  return t;
}

std::vector<std::string> strings() { return golden()["strings"].get<std::vector<std::string>>(); }

const json& variant(const char* name) {
  for (const json& v : golden()["variants"]) {
    if (v["name"] == name) return v;
  }
  throw std::runtime_error(std::string("no variant ") + name);
}

void expect_golden_ids(const Tokenizer& t, const json& v) {
  const auto texts = strings();
  const auto ids = v["ids"].get<std::vector<Ids>>();
  ASSERT_EQ(texts.size(), ids.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(t.encode(texts[i], false), ids[i])
        << "variant " << v["name"] << ", string #" << i << ": " << ::testing::PrintToString(texts[i]);
  }
}

TEST(SmolLM2Tokenizer, MetadataMatchesTheModel) {
  const Tokenizer& t = smollm2();
  EXPECT_EQ(t.vocab_size(), golden()["vocab_size"].get<int64_t>());
  EXPECT_EQ(t.bos_id(), golden()["bos_id"].get<int32_t>());
  EXPECT_EQ(t.eos_id(), golden()["eos_id"].get<int32_t>());
  EXPECT_EQ(t.unk_id(), golden()["unk_id"].get<int32_t>());
  EXPECT_EQ(t.add_bos(), golden()["add_bos"].get<bool>());
  EXPECT_EQ(t.add_eos(), golden()["add_eos"].get<bool>());
  EXPECT_TRUE(t.is_special(t.token_id("<|im_start|>").value()));
  EXPECT_EQ(t.token_bytes(t.token_id("Ġthe").value()), " the");
}

TEST(SmolLM2Tokenizer, GoldenIdsFromTokenizerJson) {
  const json& v = variant("smollm");
  expect_golden_ids(smollm2(), v);
  // Spot checks of the cases the golden set exists for.
  const auto texts = strings();
  const auto ids = v["ids"].get<std::vector<Ids>>();
  EXPECT_EQ(texts[0], "The capital of France is");
  EXPECT_EQ(smollm2().encode("12345", false).size(), 5u) << "one token per digit";
  EXPECT_EQ(smollm2().encode("<|im_start|>user\nHi<|im_end|>", false).front(), 1);
}

TEST(SmolLM2Tokenizer, NamedPipelinesMatchHuggingFace) {
  // The same vocabulary as a TokenizerSpec, with the pipeline chosen by the
  // llama.cpp name (as a GGUF file would give it).
  for (const json& v : golden()["variants"]) {
    if (v["pre"].is_null()) continue;
    HfTokenizerFiles files = read_hf_tokenizer_json(kTokenizerJson);
    files.spec.pre = v["pre"].get<std::string>();
    const Tokenizer t(files.spec);
    SCOPED_TRACE(files.spec.pre);
    expect_golden_ids(t, v);
  }
}

TEST(SmolLM2Tokenizer, TokenizerJsonPipelinesMatchHuggingFace) {
  // Each variant's pre_tokenizer (as `tokenizers` serialised it) patched into
  // the SmolLM2 tokenizer.json.
  const json base = json::parse(read_file(kTokenizerJson));
  const std::string config = read_file(kDataDir + "/smollm2/tokenizer_config.json");
  for (const json& v : golden()["variants"]) {
    json j = base;
    j["pre_tokenizer"] = v["pre_tokenizer"];
    j["normalizer"] = v["normalizer"];  // NFC for qwen2
    j["model"]["ignore_merges"] = v["ignore_merges"];
    testing::ScratchDir dir;
    dir.write("tokenizer_config.json", config);
    const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", j.dump()));
    SCOPED_TRACE(v["name"].get<std::string>());
    expect_golden_ids(t, v);
  }
}

TEST(SmolLM2Tokenizer, DecodeIsExactAndSkipsSpecialsLikeHuggingFace) {
  const json& v = variant("smollm");
  const auto texts = strings();
  const auto ids = v["ids"].get<std::vector<Ids>>();
  const auto skipped = v["decoded_skip_special"].get<std::vector<std::string>>();
  const int32_t unk = smollm2().unk_id();
  for (size_t i = 0; i < texts.size(); ++i) {
    const bool has_unk = std::find(ids[i].begin(), ids[i].end(), unk) != ids[i].end();
    if (!has_unk) {
      EXPECT_EQ(smollm2().decode(ids[i]), texts[i]) << i;
    }
    // Hugging Face decodes lossily (U+FFFD for ill-formed bytes); decode() is
    // exact, and StreamDecoder is the lossy one.
    if (skipped[i].find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(smollm2().decode(ids[i], true), skipped[i]) << i;
    } else {
      StreamDecoder d(smollm2(), /*skip_special_tokens=*/true);
      std::string lossy;
      for (int32_t id : ids[i]) lossy += d.push(id);
      lossy += d.flush();
      EXPECT_EQ(lossy, skipped[i]) << i;
    }
  }
}

TEST(SmolLM2Tokenizer, BytesWithoutATokenBecomeUnknown) {
  // SmolLM2 has no token for byte 0x04 (nor 0xF1, the lead byte of U+40000..);
  // like Hugging Face with unk_token set, such bytes encode as the unknown token.
  const Tokenizer& t = smollm2();
  ASSERT_EQ(t.unk_id(), 0);
  EXPECT_FALSE(t.token_id(byte_level_encode("\x04")).has_value());
  const Ids ids = t.encode(
      "a\x04"
      "b",
      false);
  EXPECT_EQ(ids, (Ids{t.token_id("a").value(), 0, t.token_id("b").value()}));
}

TEST(SmolLM2Tokenizer, RoundTripsRandomBytes) {
  // Any bytes round-trip, as long as each byte has a token (see above).
  const Tokenizer& t = smollm2();
  std::vector<char> bytes_with_tokens;
  for (int b = 0; b < 256; ++b) {
    if (t.token_id(byte_level_encode(std::string(1, char(b))))) bytes_with_tokens.push_back(char(b));
  }
  ASSERT_GT(bytes_with_tokens.size(), 200u);
  std::mt19937 rng(2024);
  const std::vector<std::string> parts = {"<|im_start|>",     "<|im_end|>", " the", "1234",    "\n\n", "é",
                                          "\xF0\x9F\x90\x8D", "   ",        "'s",   "\xE2\x9D"};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    for (int k = static_cast<int>(rng() % 30); k > 0; --k) {
      switch (rng() % 3) {
        case 0:
          s += parts[rng() % parts.size()];
          break;
        case 1:
          s.push_back(static_cast<char>(0x20 + rng() % 0x5F));
          break;
        default:  // often ill-formed UTF-8
          s.push_back(bytes_with_tokens[rng() % bytes_with_tokens.size()]);
          break;
      }
    }
    ASSERT_EQ(t.decode(t.encode(s, false)), s) << ::testing::PrintToString(s);
  }
}

TEST(SmolLM2Tokenizer, StreamDecoderHoldsSplitEmoji) {
  const Tokenizer& t = smollm2();
  for (const std::string emoji : {"🐍", "❤️", "👨‍👩‍👧"}) {
    const Ids ids = t.encode(emoji, false);
    ASSERT_GE(ids.size(), 2u) << "the test needs an emoji spread over several tokens";
    StreamDecoder d(t);
    std::string joined;
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::string out = d.push(ids[k]);
      // Output so far is exactly the complete characters of the bytes so far.
      const std::string bytes_so_far = t.decode(Ids(ids.begin(), ids.begin() + long(k) + 1));
      joined += out;
      EXPECT_EQ(joined, bytes_so_far.substr(0, utf8_valid_prefix(bytes_so_far))) << emoji << k;
    }
    joined += d.flush();
    EXPECT_EQ(joined, emoji);
  }
  // "🐍" is four bytes; nothing may come out before its last token.
  const Ids snake = t.encode("🐍", false);
  StreamDecoder d(t);
  for (size_t k = 0; k + 1 < snake.size(); ++k) EXPECT_EQ(d.push(snake[k]), "");
  EXPECT_EQ(d.push(snake.back()), "🐍");
}

TEST(SmolLM2Tokenizer, ConcurrentEncodesAgree) {
  // Copies share one piece cache; encoding from several threads at once must
  // give the single-threaded answers.
  const json& v = variant("smollm");
  const auto texts = strings();
  const auto ids = v["ids"].get<std::vector<Ids>>();
  const Tokenizer fresh = Tokenizer::from_hf_json(kTokenizerJson);  // empty cache
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      const Tokenizer t = fresh;
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t j = (i * 7 + size_t(k) * 13 + size_t(round)) % texts.size();
          if (t.encode(texts[j], false) != ids[j]) ++mismatches[size_t(k)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace nnsight
