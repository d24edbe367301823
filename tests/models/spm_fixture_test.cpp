// The tiny Mistral fixture with a SentencePiece-style tokenizer
// (tests/data/models/mistral_spm: tokenizer.json with byte_fallback and the
// tokenizer.model it was converted from, 320 pieces to match the model):
// text prompts in, text out, through the public API; and the same directory
// without tokenizer.json, tokenized from tokenizer.model alone.
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/tokenizer/stream_decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_loader.h"
#include "core/tokenizer/utf8.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

const std::string kFixture = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/models/mistral_spm";
const char* const kPrompts[] = {"The capital of France is", "  two leading spaces", "tabs\tand\nnewlines",
                                "byte fallback: \xC3\xA9\xE2\x98\x83"};

EngineArgs args(const std::string& dir) { return EngineArgs().model(dir).kv_cache_memory_mb(4).show_progress(false); }

void copy_file(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  ASSERT_TRUE(in.good()) << from;
  std::ofstream(to, std::ios::binary) << std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(SpmFixture, GeneratesTextFromATextPrompt) {
  LLM llm(args(kFixture));
  for (const char* prompt : kPrompts) {
    const std::vector<int32_t> ids = llm.encode(prompt);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1) << "BOS first";
    EXPECT_EQ(llm.decode(ids, true), prompt) << "decode drops BOS and the dummy-prefix space";
  }
  const RequestOutput out = llm.generate(kPrompts[0], SamplingParams().temperature(0).max_tokens(6).ignore_eos(true));
  EXPECT_EQ(out.error, "");
  ASSERT_EQ(out.token_ids.size(), 6u);
  EXPECT_EQ(out.prompt_token_ids, llm.encode(kPrompts[0]));
  // The generated text is the engine's stream decoding of the new tokens, which continue the prompt: a
  // leading "▁" of the first one is a space, not a dummy prefix.
  const Tokenizer tokenizer = load_tokenizer_for_model(kFixture);
  StreamDecoder stream(tokenizer, /*skip_special_tokens=*/true, /*starts_text=*/false);
  std::string want;
  for (int32_t id : out.token_ids) want += stream.push(id);
  want += stream.flush();
  EXPECT_EQ(out.text, want);
  // Where those tokens form whole characters (random weights need not), that is what decoding the whole
  // sequence adds to the prompt's text.
  std::vector<int32_t> all = out.prompt_token_ids;
  all.insert(all.end(), out.token_ids.begin(), out.token_ids.end());
  const std::string full = llm.decode(all, true);
  const std::string prompt_text = llm.decode(out.prompt_token_ids, true);
  ASSERT_EQ(full.compare(0, prompt_text.size(), prompt_text), 0);
  if (utf8_valid_prefix(full) == full.size()) EXPECT_EQ(out.text, full.substr(prompt_text.size()));
  EXPECT_FALSE(out.text.empty());
}

TEST(SpmFixture, TokenizerModelAloneTokenizesLikeTokenizerJson) {
  testing::ScratchDir dir;
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.model"}) {
    copy_file(kFixture + "/" + f, dir.file(f));
  }
  LLM from_json(args(kFixture));
  LLM from_model(args(dir.path()));
  for (const char* prompt : kPrompts) {
    EXPECT_EQ(from_model.encode(prompt), from_json.encode(prompt)) << prompt;
  }
  const SamplingParams greedy = SamplingParams().temperature(0).max_tokens(4).ignore_eos(true);
  const RequestOutput a = from_json.generate(kPrompts[0], greedy);
  const RequestOutput b = from_model.generate(kPrompts[0], greedy);
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_EQ(a.text, b.text);
}

}  // namespace
}  // namespace nnsight
