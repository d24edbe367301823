// SentencePiece-style vocabularies (tests/data/tokenizer/spm/, made by
// make_spm_golden.py) against the ids and texts of the reference
// implementations: the `sentencepiece` package for tokenizer.model and
// "llama" GGUF vocabularies, Hugging Face `tokenizers` for tokenizer.json,
// and transformers' AutoTokenizer for a directory with tokenizer_config.json.
// Vocabularies: Mistral 7B v0.1 (real), and models trained with Llama 2's,
// Gemma's and Phi-3's settings.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/sentencepiece_model.h"
#include "core/tokenizer/stream_decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_loader.h"
#include "core/tokenizer/utf8.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kDataDir = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const json& golden() {
  static const json g = json::parse(read_file(kDataDir + "/tokenizer/spm/golden.json"));
  return g;
}

const json& find_case(const std::string& name) {
  for (const json& c : golden()["cases"]) {
    if (c["name"] == name) return c;
  }
  throw std::runtime_error("no golden case " + name);
}

Tokenizer load_case(const json& c, testing::ScratchDir& dir) {
  const std::string kind = c["kind"];
  const std::string path = kDataDir + "/" + c["path"].get<std::string>();
  if (kind == "sentencepiece") return load_sentencepiece_model(path);
  if (kind == "gguf" || kind == "auto") return load_tokenizer_for_model(path);
  if (kind == "tokenizer.json") return Tokenizer::from_hf_json(path);
  if (kind == "tokenizer.json-only") {
    // Without the tokenizer_config.json that sits beside it.
    const std::string copy = dir.file("tokenizer.json");
    std::ofstream(copy, std::ios::binary) << read_file(path);
    return Tokenizer::from_hf_json(copy);
  }
  throw std::runtime_error("unknown case kind " + kind);
}

std::string stream_decode(const Tokenizer& t, const Ids& ids, bool skip_special) {
  StreamDecoder d(t, skip_special);
  std::string out;
  for (int32_t id : ids) {
    const std::string piece = d.push(id);
    EXPECT_EQ(utf8_valid_prefix(piece), piece.size()) << "the stream decoder emitted part of a character";
    out += piece;
  }
  out += d.flush();
  return out;
}

class SpmGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmGolden, IdsAndTextsMatchTheReference) {
  const json& c = find_case(GetParam());
  testing::ScratchDir dir;
  const Tokenizer t = load_case(c, dir);
  const bool skip = c["skip_special_decode"].get<bool>();
  size_t compared = 0;
  for (const json& e : c["entries"]) {
    const std::string text = e["text"];
    const Ids want = e["ids"].get<Ids>();
    const Ids got = t.encode(text);
    EXPECT_EQ(got, want) << GetParam() << ": '" << text << "'";
    if (e["decoded"].is_null()) continue;
    const std::string decoded = e["decoded"];
    EXPECT_EQ(t.decode(want, skip), decoded) << GetParam() << ": decode of '" << text << "'";
    EXPECT_EQ(stream_decode(t, want, skip), decoded) << GetParam() << ": streamed decode of '" << text << "'";
    ++compared;
  }
  EXPECT_GE(compared, 30u);
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const json& c : golden()["cases"]) names.push_back(c["name"]);
  return names;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Cases, SpmGolden, ::testing::ValuesIn(case_names()), param_name);

TEST(SpmGoldenData, CoversTheFamiliesAndSources) {
  // Guards against a regenerated golden file that silently drops cases.
  for (const char* name : {"mistral.model", "mistral.json", "llama2.model", "llama2.gguf", "llama2.json", "gemma.model",
                           "gemma.gguf", "gemma.json", "phi3.auto", "phi3.json", "fixture.model"}) {
    EXPECT_NO_THROW(find_case(name)) << name;
  }
}

TEST(SpmGoldenData, ByteFallbackAndDummyPrefixAreExercised) {
  // Mistral: "ភាសាខ្មែរ" (Khmer) is outside the vocabulary and falls back to bytes.
  testing::ScratchDir dir;
  const Tokenizer t = load_case(find_case("mistral.model"), dir);
  const Ids ids = t.encode("ភាសាខ្មែរ", false);
  size_t bytes = 0;
  for (int32_t id : ids) bytes += t.token_string(id).rfind("<0x", 0) == 0 ? 1 : 0;
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(t.decode(ids), "ភាសាខ្មែរ");
  // The dummy prefix: "Hello" is "▁Hello", and decoding drops the space again.
  EXPECT_EQ(t.token_string(t.encode("Hello", false).at(0)), "\xE2\x96\x81Hello");
  EXPECT_EQ(t.decode(t.encode("Hello", false)), "Hello");
}

}  // namespace
}  // namespace nnsight
