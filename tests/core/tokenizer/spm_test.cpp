// The parts of SentencePiece-style tokenization on hand-made inputs: the
// normalizer, Metaspace, SentencePiece's score merges (ties, byte fallback,
// unused pieces), the tokenizer.model reader and what each source refuses.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/metaspace.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/sentencepiece_model.h"
#include "core/tokenizer/spm_model.h"
#include "core/tokenizer/stream_decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "support/expect_load_error.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using Ids = std::vector<int32_t>;
using json = nlohmann::json;
const std::string kMark = "\xE2\x96\x81";  // "▁"

std::string normalize(const Normalizer& n, const std::string& text) {
  std::string out, tmp;
  n.apply(text, out, tmp);
  return out;
}

TEST(SpmNormalizer, PrependReplaceAndRegexInOrder) {
  const Normalizer llama({NormalizeRule::prepend(kMark), NormalizeRule::replace(" ", kMark)});
  EXPECT_EQ(normalize(llama, "a b"), kMark + "a" + kMark + "b");
  EXPECT_EQ(normalize(llama, " a"), kMark + kMark + "a");
  EXPECT_EQ(normalize(llama, ""), "");  // Prepend leaves empty text alone
  // transformers' rules for a bare tokenizer.model: extra spaces removed, then the dummy prefix doubled.
  const Normalizer bare({NormalizeRule::replace_regex(R"(\A +| +\z)", ""), NormalizeRule::replace_regex(" {2,}", " "),
                         NormalizeRule::replace(" ", kMark),
                         NormalizeRule::replace_regex("\\A" + kMark, kMark + kMark)});
  EXPECT_EQ(normalize(bare, "  a   b  "), "a" + kMark + "b");
  EXPECT_EQ(normalize(bare, "a"), "a");
  const Normalizer doubled(
      {NormalizeRule::replace(" ", kMark), NormalizeRule::replace_regex("\\A" + kMark, kMark + kMark)});
  EXPECT_EQ(normalize(doubled, " x y"), kMark + kMark + "x" + kMark + "y");
  testing::expect_load_error([] { Normalizer({NormalizeRule::replace_regex("([", "")}); },
                             {"'(['", "does not compile"});
}

TEST(SpmMetaspace, PrependSchemes) {
  std::string out;
  Metaspace m;
  m.prepend_scheme = PrependScheme::kFirst;
  m.apply("a b", true, out);
  EXPECT_EQ(out, kMark + "a" + kMark + "b");
  m.apply("a b", false, out);  // not at the start of the input: nothing prepended
  EXPECT_EQ(out, "a" + kMark + "b");
  m.apply(" a", true, out);  // already starts with the replacement
  EXPECT_EQ(out, kMark + "a");
  m.prepend_scheme = PrependScheme::kAlways;
  m.apply("a", false, out);
  EXPECT_EQ(out, kMark + "a");
  m.prepend_scheme = PrependScheme::kNever;
  m.apply("a", true, out);
  EXPECT_EQ(out, "a");
  PrependScheme s;
  EXPECT_TRUE(parse_prepend_scheme("first", s));
  EXPECT_EQ(s, PrependScheme::kFirst);
  EXPECT_FALSE(parse_prepend_scheme("sometimes", s));
}

// A vocabulary small enough to reason about by hand.
struct TinySpm {
  std::vector<std::string> pieces{"<unk>", "<s>",    "</s>",   "a",      "b",   "c",         "ab", "bc",
                                  "abc",   "<0x78>", "<0xC3>", "<0xA9>", kMark, kMark + "a", "cc"};
  std::vector<float> scores{0, 0, 0, -1, -1, -1, -5, -5, -2, 0, 0, 0, -1, -3, -4};
  std::vector<int32_t> types{2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 6, 1, 1, 5};
};

Ids spm_encode(const SpmModel& m, const std::string& text) {
  Ids out;
  SpmScratch s;
  m.encode(text, out, s);
  return out;
}

TEST(SpmModel, HighestScoreFirstLeftmostOnTies) {
  TinySpm v;
  const SpmModel m(v.pieces, v.scores, v.types, 0, true);
  // "ab" and "bc" tie at -5: the leftmost pair merges, then ab + c forms "abc".
  EXPECT_EQ(spm_encode(m, "abc"), (Ids{8}));
  EXPECT_EQ(spm_encode(m, "bcab"), (Ids{7, 6}));
  EXPECT_EQ(spm_encode(m, kMark + "ab"), (Ids{13, 4}));  // "▁a" (-3) beats "ab" (-5)
}

TEST(SpmModel, ByteFallbackUnknownAndUnusedPieces) {
  TinySpm v;
  const SpmModel m(v.pieces, v.scores, v.types, 0, true);
  EXPECT_EQ(spm_encode(m, "x"), (Ids{9}));              // <0x78>
  EXPECT_EQ(spm_encode(m, "\xC3\xA9"), (Ids{10, 11}));  // é as two byte tokens
  EXPECT_EQ(spm_encode(m, "y"), (Ids{0}));              // no byte token for 'y': unknown
  EXPECT_EQ(spm_encode(m, "\xFF"), (Ids{0}));           // ill-formed byte: a symbol of its own
  EXPECT_EQ(spm_encode(m, "cc"), (Ids{5, 5}));          // "cc" is unused: merged, then split back
  const SpmModel no_fallback(v.pieces, v.scores, v.types, 0, false);
  EXPECT_EQ(spm_encode(no_fallback, "x"), (Ids{0}));
  const SpmModel no_unk(v.pieces, v.scores, v.types, -1, false);
  EXPECT_THROW(spm_encode(no_unk, "y"), Error);
}

TokenizerSpec tiny_spec() {
  TinySpm v;
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = v.pieces;
  spec.scores = v.scores;
  spec.token_types = v.types;
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_bos = true;
  return spec;
}

TEST(SpmTokenizer, DummyPrefixSpecialsAndDecode) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(t.encode("ab"), (Ids{1, 13, 4}));                  // "▁ab": <s> ▁a b
  EXPECT_EQ(t.encode("ab</s>ab"), (Ids{1, 13, 4, 2, 13, 4}));  // a prefix after a special token, as llama.cpp
  EXPECT_EQ(t.encode("", false), (Ids{}));
  EXPECT_EQ(t.decode({1, 13, 4}), "<s> ab");
  EXPECT_EQ(t.decode({1, 13, 4}, true), "ab");   // the dummy prefix goes
  EXPECT_EQ(t.decode({12, 12, 3}, true), " a");  // only one space goes
  EXPECT_EQ(t.token_bytes(10), "\xC3");
  StreamDecoder d(t, true);
  EXPECT_EQ(d.push(13), "a");
  EXPECT_EQ(d.push(10), "");  // half of é is held back
  EXPECT_EQ(d.push(11), "\xC3\xA9");
  StreamDecoder continuation(t, true, false);
  EXPECT_EQ(continuation.push(13), " a");  // generated text keeps its space
}

TEST(SpmTokenizer, SpecErrors) {
  TokenizerSpec spec = tiny_spec();
  spec.scores.pop_back();
  testing::expect_load_error([&] { Tokenizer t(spec); }, {"scores has 14 entries", "15 tokens"});
  spec = tiny_spec();
  spec.model = "t5";
  testing::expect_load_error([&] { Tokenizer t(spec); }, {"unsupported tokenizer model 't5'"});
}

// ---- tokenizer.model ----

// Protobuf encoding helpers (wire format by hand, independent of the reader).
std::string varint(uint64_t v) {
  std::string s;
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    s.push_back(char(v ? b | 0x80 : b));
  } while (v);
  return s;
}
std::string field_bytes(int field, const std::string& data) {
  return varint(uint64_t(field) << 3 | 2) + varint(data.size()) + data;
}
std::string field_varint(int field, uint64_t v) { return varint(uint64_t(field) << 3) + varint(v); }
std::string piece(const std::string& text, float score, int type) {
  std::string s = field_bytes(1, text);
  uint32_t bits;
  std::memcpy(&bits, &score, 4);
  s += varint(2 << 3 | 5);
  for (int i = 0; i < 4; ++i) s.push_back(char(bits >> (8 * i)));
  return s + field_varint(3, uint64_t(type));
}

std::string tiny_model(int model_type = 2, bool charsmap = false) {
  TinySpm v;
  std::string m;
  for (size_t i = 0; i < v.pieces.size(); ++i) m += field_bytes(1, piece(v.pieces[i], v.scores[i], v.types[i]));
  m += field_bytes(2, field_varint(3, uint64_t(model_type)) + field_varint(35, 1) + field_varint(43, uint64_t(-1)));
  std::string norm = field_bytes(1, charsmap ? "nmt_nfkc" : "identity") + field_varint(4, 0);
  if (charsmap) norm += field_bytes(2, "rules");
  return m + field_bytes(3, norm);
}

TEST(SentencePieceModel, ReadsPiecesScoresTypesAndSpecs) {
  const SentencePieceModelFile f = parse_sentencepiece_model(tiny_model(), "tiny.model");
  EXPECT_EQ(f.spec.tokens, TinySpm().pieces);
  EXPECT_EQ(f.spec.scores, TinySpm().scores);
  EXPECT_EQ(f.spec.token_types, TinySpm().types);
  EXPECT_EQ(f.spec.unk_id, 0);
  EXPECT_EQ(f.spec.bos_id, 1);
  EXPECT_EQ(f.spec.pad_id, -1);  // a negative int32 is a ten-byte varint
  EXPECT_TRUE(f.spec.add_bos);
  const Tokenizer t(f.spec, f.pipeline, "tiny.model");
  EXPECT_EQ(t.encode("ab x"), (Ids{1, 13, 4, 12, 9}));
}

TEST(SentencePieceModel, RefusalsNameFileAndField) {
  testing::expect_load_error([] { parse_sentencepiece_model(tiny_model(1), "u.model"); },
                             {"u.model", "trainer_spec.model_type = 1 (UNIGRAM)", "only BPE"});
  testing::expect_load_error([] { parse_sentencepiece_model(tiny_model(2, true), "n.model"); },
                             {"n.model", "normalizer_spec 'nmt_nfkc'", "precompiled_charsmap"});
  const std::string whole = tiny_model();
  testing::expect_load_error([&] { parse_sentencepiece_model(whole.substr(0, whole.size() - 3), "t.model"); },
                             {"t.model", "runs past the end"});
  testing::expect_load_error([] { parse_sentencepiece_model("", "e.model"); }, {"e.model", "no pieces"});
}

// ---- tokenizer.json ----

json spm_json() {
  TinySpm v;
  json vocab = json::object();
  for (size_t i = 0; i < v.pieces.size(); ++i) vocab[v.pieces[i]] = i;
  return {{"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", {"a b", "b c", kMark + " a", "ab c"}},
            {"byte_fallback", true},
            {"fuse_unk", true},
            {"unk_token", "<unk>"}}},
          {"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", kMark}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMark}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", kMark}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}};
}

TEST(SpmTokenizerJson, RankMergesFuseUnkAndByteFallback) {
  testing::ScratchDir dir;
  const Tokenizer t = Tokenizer::from_hf_json(dir.write("tokenizer.json", spm_json().dump()));
  // By rank: "a b" (0) before "▁ a" (2), then "ab c" (3); SentencePiece's scores would differ.
  EXPECT_EQ(t.encode("abc", false), (Ids{12, 8}));
  EXPECT_EQ(t.encode("yy x", false), (Ids{12, 0, 12, 9}));  // two unknown 'y's fused into one
  EXPECT_EQ(t.decode({12, 6, 5}), "abc");
}

TEST(SpmTokenizerJson, RefusalsNameTheKey) {
  testing::ScratchDir dir;
  auto refuse = [&](const std::function<void(json&)>& edit, std::initializer_list<std::string> fragments) {
    json j = spm_json();
    edit(j);
    const std::string path = dir.write("tokenizer.json", j.dump());
    testing::expect_load_error([&] { Tokenizer::from_hf_json(path); }, fragments);
  };
  refuse([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, {"tokenizer.json", "normalizer type 'NFKC'"});
  refuse(
      [](json& j) {
        j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(["}}}, {"content", ""}};
      },
      {"tokenizer.json", "'(['", "does not compile"});
  refuse([](json& j) { j["decoder"]["decoders"].erase(1); },
         {"byte_fallback is set but the decoder has no ByteFallback"});
  refuse([](json& j) { std::swap(j["decoder"]["decoders"][2], j["decoder"]["decoders"][3]); }, {"Strip before Fuse"});
  refuse([](json& j) { j["decoder"] = nullptr; }, {"decoder is missing"});
  refuse([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, {"pre_tokenizer type 'Whitespace'"});
  refuse(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}};
      },
      {"pre_tokenizer.prepend_scheme 'sometimes'"});
}

}  // namespace
}  // namespace nnsight
