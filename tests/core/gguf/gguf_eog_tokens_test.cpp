// llama_cpp_eog_ids: the ids llama.cpp ends generation at, for vocabularies
// shaped like the families' own (the expected sets written out by hand from
// llama-vocab.cpp's rules), and through GgufWeights into ModelConfig.
#include "core/gguf/gguf_eog_tokens.h"

#include <gtest/gtest.h>

#include "core/gguf/gguf_weights.h"
#include "support/gguf_writer.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

TEST(GgufEogTokens, QwenEndsAtItsTurnEndTextAndFillInTheMiddleTokens) {
  // Qwen2.5's specials: <|endoftext|> is eos in base models, <|im_end|> in chat ones.
  const std::vector<std::string> v = {
      "a",           "<|endoftext|>", "<|im_start|>", "<|im_end|>",     "<|fim_prefix|>",
      "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<|vision_end|>", "b"};
  GgufSpecialIds ids;
  ids.eos = 3;
  EXPECT_EQ(llama_cpp_eog_ids(v, ids), (std::vector<int64_t>{1, 3, 5, 6, 7}));
  // A file's own fill-in-the-middle pad id wins over the text.
  ids.fim_pad = 9;
  EXPECT_EQ(llama_cpp_eog_ids(v, ids), (std::vector<int64_t>{1, 3, 6, 7, 9}));
}

TEST(GgufEogTokens, FileIdsCountAndOutOfRangeOnesAreIgnored) {
  const std::vector<std::string> v = {"<s>", "x", "y", "z"};
  GgufSpecialIds ids;
  ids.eos = 1;
  ids.eot = 2;
  ids.eom = 40;  // outside the vocabulary
  EXPECT_EQ(llama_cpp_eog_ids(v, ids), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(llama_cpp_eog_ids(v, GgufSpecialIds{}).empty());
}

TEST(GgufEogTokens, GptOssEndsAMessageNotTheGenerationAtEnd) {
  const std::vector<std::string> harmony = {"<|start|>", "<|end|>", "<|return|>", "<|call|>", "<|endoftext|>"};
  EXPECT_EQ(llama_cpp_eog_ids(harmony, GgufSpecialIds{}), (std::vector<int64_t>{2, 3, 4}));
  // Phi-3's <|end|> does end it (no <|return|> / <|call|> beside it).
  const std::vector<std::string> phi3 = {"<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>"};
  EXPECT_EQ(llama_cpp_eog_ids(phi3, GgufSpecialIds{}), (std::vector<int64_t>{0, 2}));
}

TEST(GgufEogTokens, SlashSIsNoEndBesideToolResponse) {
  const std::vector<std::string> v = {"<pad>", "<eos>", "</s>", "<turn|>", "<|tool_response>"};
  EXPECT_EQ(llama_cpp_eog_ids(v, GgufSpecialIds{}), (std::vector<int64_t>{1, 3, 4}));
  const std::vector<std::string> llama2 = {"<unk>", "<s>", "</s>", "a"};
  EXPECT_EQ(llama_cpp_eog_ids(llama2, GgufSpecialIds{}), (std::vector<int64_t>{2}));
}

// Through the loader: a Llama 3 Instruct-shaped vocabulary whose file names
// only <|end_of_text|> as eos still ends at <|eot_id|> and <|eom_id|>.
TEST(GgufEogTokens, GgufWeightsAddThemToTheConfigsEndIds) {
  testing::ScratchDir dir;
  testing::GgufWriter w;
  w.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", 8)
      .kv_u32("llama.feed_forward_length", 16)
      .kv_u32("llama.attention.head_count", 2)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_string("tokenizer.ggml.model", "gpt2")
      .kv_strings("tokenizer.ggml.tokens",
                  {"a", "b", "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|eom_id|>", "<|eot_id|>"})
      .kv_u32("tokenizer.ggml.eos_token_id", 3);
  w.tensor("token_embd.weight", at::zeros({7, 8}));
  w.write(dir.file("m.gguf"));
  const GgufWeights weights(dir.file("m.gguf"));
  const ModelConfig& c = weights.config();
  EXPECT_EQ(c.eos_token_id, 3);
  EXPECT_EQ(c.more_eos_token_ids, (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(c.is_eos(4));
}

}  // namespace
}  // namespace nnsight
