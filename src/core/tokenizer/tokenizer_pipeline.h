// TokenizerPipeline: the parts of a byte-level BPE tokenizer that are not the
// vocabulary -- how text is pre-tokenized and how the BPE model treats whole
// pieces. GGUF files name a pipeline (tokenizer.ggml.pre); tokenizer.json
// spells one out.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/spm_pipeline.h"

namespace nnsight {

struct TokenizerPipeline {
  PreTokenizerConfig pre_tokenizer;  // pieces BPE merges within
  // A piece that is itself a vocabulary token is emitted as that token without
  // running the merges (Hugging Face BPE `ignore_merges`; Llama 3 sets it).
  bool ignore_merges = false;
  // Set for SentencePiece-style tokenizers, which then ignore pre_tokenizer
  // (core/tokenizer/spm_pipeline.h).
  std::optional<SpmPipeline> spm;

  TokenizerPipeline& add_step(PreTokenizeStep step) {
    pre_tokenizer.steps.push_back(std::move(step));
    return *this;
  }
  TokenizerPipeline& set_ignore_merges(bool v) {
    ignore_merges = v;
    return *this;
  }

  // The pipeline llama.cpp uses for a tokenizer.ggml.pre name: "gpt2",
  // "smollm" (and "starcoder", "refact", which split the same way),
  // "llama-bpe" / "llama3" / "llama-v3", "qwen2", "default". Throws LoadError naming the
  // pre-tokenizer otherwise.
  static TokenizerPipeline for_pre_name(const std::string& name);
};

// The GPT-2 split regex, as Hugging Face's ByteLevel pre-tokenizer applies it.
extern const char* const kGpt2SplitPattern;

}  // namespace nnsight
