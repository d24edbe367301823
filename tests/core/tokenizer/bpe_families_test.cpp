// Byte-level BPE families by llama.cpp pre-tokenizer name (GPT-2, GPT-NeoX/MPT,
// OLMo, StarCoder, Command-R, Llama 3, DBRX, Qwen2, Qwen3.5, DeepSeek LLM /
// Coder / V3, Falcon, Tekken, GPT-4o, Tiny Aya, BLOOM, Kimi K2, SuperBPE,
// Ling, Seed-Coder, EXAONE MoE, Jais 2) against ids from Hugging Face
// `tokenizers`. tests/data/tokenizer/bpe_families/make_golden.py rebuilt each
// family's tokenizer.json pipeline in `tokenizers` with a small trained
// vocabulary and wrote it both as tokenizer.json and as a GGUF file carrying
// the llama.cpp pre name; both load paths must give `tokenizers`' ids.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_tokenizer_spec.h"
#include "core/tokenizer/tokenizer.h"

namespace nnsight {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kDir = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/tokenizer/bpe_families";

const json& golden() {
  static const json g = [] {
    std::ifstream in(kDir + "/golden.json", std::ios::binary);
    EXPECT_TRUE(in.good()) << "cannot open " << kDir << "/golden.json";
    return json::parse(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }();
  return g;
}

Tokenizer from_gguf(const std::string& name) {
  GgufFile file(kDir + "/" + name + "/tokenizer.gguf");
  return Tokenizer(tokenizer_spec_from_gguf(file));
}

// Every string's ids and decode; returns the number of strings that differ.
int check(const Tokenizer& t, const json& family, const char* path) {
  int mismatches = 0;
  const json& cases = family["cases"];
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"].get<std::string>();
    const Ids want = cases[i]["ids"].get<Ids>();
    const Ids got = t.encode(text, true);
    if (got != want) ++mismatches;
    EXPECT_EQ(got, want) << family["name"] << " via " << path << ", string #" << i << ": "
                         << ::testing::PrintToString(text);
    EXPECT_EQ(t.decode(want), cases[i]["decoded"].get<std::string>())
        << family["name"] << " via " << path << ", string #" << i;
  }
  return mismatches;
}

TEST(BpeFamiliesTokenizer, GoldenCoversTheFamilies) {
  const json& families = golden()["families"];
  EXPECT_GE(families.size(), 20u);
  for (const json& f : families) EXPECT_GE(f["cases"].size(), 80u) << f["name"];
}

TEST(BpeFamiliesTokenizer, TokenizerJsonGivesHuggingFaceIds) {
  for (const json& f : golden()["families"]) {
    if (!f["tokenizer_json"].get<bool>()) continue;
    SCOPED_TRACE(f["name"].get<std::string>());
    const Tokenizer t = Tokenizer::from_hf_json(kDir + "/" + f["name"].get<std::string>() + "/tokenizer.json");
    EXPECT_EQ(check(t, f, "tokenizer.json"), 0);
  }
}

TEST(BpeFamiliesTokenizer, GgufPreNameGivesHuggingFaceIds) {
  for (const json& f : golden()["families"]) {
    SCOPED_TRACE(f["name"].get<std::string>() + " (pre '" + f["pre"].get<std::string>() + "')");
    const Tokenizer t = from_gguf(f["name"].get<std::string>());
    EXPECT_EQ(check(t, f, "GGUF"), 0);
  }
}

TEST(BpeFamiliesTokenizer, DecodeGivesTheTextBackUnlessNormalized) {
  // Families without a normalizer decode to exactly the input; NFC families
  // to its NFC form (checked against `tokenizers` above).
  for (const json& f : golden()["families"]) {
    const std::string name = f["name"].get<std::string>();
    if (name == "qwen2" || name == "qwen35" || name == "gpt_neox" || name == "command_r") continue;
    const Tokenizer t = from_gguf(name);
    for (const json& c : f["cases"]) {
      const std::string text = c["text"].get<std::string>();
      EXPECT_EQ(t.decode(t.encode(text, false)), text) << name << ": " << ::testing::PrintToString(text);
    }
  }
}

TEST(BpeFamiliesTokenizer, KimiK2GgufWithoutMergesMergesByRank) {
  // As llama.cpp writes Kimi K2: a tiktoken vocabulary, no merges; the
  // merges come from the ranks (ids), checked against tokenizers above.
  GgufFile file(kDir + "/kimi_k2/tokenizer.gguf");
  EXPECT_EQ(file.find("tokenizer.ggml.merges"), nullptr);
  const Tokenizer t(tokenizer_spec_from_gguf(file));
  EXPECT_LT(t.encode("the the the", false).size(), 6u);
}

TEST(BpeFamiliesTokenizer, NfcFamiliesComposeBeforeSplitting) {
  const Tokenizer qwen = from_gguf("qwen2");
  // "e" + U+0301 and "é" are the same text after NFC.
  EXPECT_EQ(qwen.encode("caf\x65\xCC\x81", false), qwen.encode("caf\xC3\xA9", false));
  // Without a normalizer they differ.
  const Tokenizer gpt2 = from_gguf("gpt2");
  EXPECT_NE(gpt2.encode("caf\x65\xCC\x81", false), gpt2.encode("caf\xC3\xA9", false));
  // Ill-formed bytes are kept as they are around the normalized runs.
  const std::string odd =
      "e\xCC\x81\xFF"
      "e\xCC\x81";
  EXPECT_EQ(qwen.decode(qwen.encode(odd, false)), "\xC3\xA9\xFF\xC3\xA9");
}

}  // namespace
}  // namespace nnsight
