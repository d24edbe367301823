// TokenizerSpec: everything needed to build a byte-level BPE tokenizer, as
// stored in GGUF metadata (tokenizer.ggml.*) or in a tokenizer.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {

struct TokenizerSpec {
  // Token id -> token string in the GPT-2 byte-to-unicode alphabet ("Ġthe").
  std::vector<std::string> tokens;
  // BPE merges in rank order, each "left right".
  std::vector<std::string> merges;
  // "gpt2": byte-level BPE (the fields above); "llama": a SentencePiece
  // vocabulary (tokens spelled with "▁", "<0xXX>" byte tokens) merged by
  // `scores`, as llama.cpp names them in tokenizer.ggml.model.
  std::string model = "gpt2";
  std::vector<float> scores;     // per token, for "llama"
  bool add_space_prefix = true;  // "llama": SentencePiece's dummy prefix
  // GGUF token types per id (1 normal, 2 unknown, 3 control, 4 user-defined,
  // 5 unused, 6 byte); empty means all normal. Control and user-defined tokens
  // are matched as whole special tokens in the input text.
  std::vector<int32_t> token_types;
  // Pre-tokenizer name as llama.cpp spells it in tokenizer.ggml.pre
  // ("gpt2", "smollm", "llama-bpe" (Llama 3), "qwen2", "default", ...).
  std::string pre = "gpt2";
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;  // prepend BOS when encoding with special tokens
  bool add_eos = false;  // append EOS likewise
  // Special tokens that swallow the whitespace before (lstrip) or after
  // (rstrip) them when matched in text (tokenizer.json added tokens).
  std::vector<int32_t> lstrip_ids, rstrip_ids;
  // The model's chat template (Jinja text, core/tokenizer/chat_template.h);
  // empty when the model has none.
  std::string chat_template;
};

}  // namespace nnsight
