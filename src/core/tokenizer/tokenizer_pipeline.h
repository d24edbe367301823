// TokenizerPipeline: the parts of a byte-level BPE tokenizer that are not the
// vocabulary -- how text is pre-tokenized and how the BPE model treats whole
// pieces. GGUF files name a pipeline (tokenizer.ggml.pre); tokenizer.json
// spells one out.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/spm_pipeline.h"
#include "core/tokenizer/unicode_normalizer.h"

namespace nnsight {

struct TokenizerPipeline {
  PreTokenizerConfig pre_tokenizer;  // pieces BPE merges within
  // A piece that is itself a vocabulary token is emitted as that token without
  // running the merges (Hugging Face BPE `ignore_merges`; Llama 3 sets it).
  bool ignore_merges = false;
  // Set for SentencePiece-style tokenizers, which then ignore pre_tokenizer
  // (core/tokenizer/spm_pipeline.h).
  std::optional<SpmPipeline> spm;
  // Applied to the text between special tokens before pre-tokenization (or
  // the SentencePiece pipeline) (tokenizer.json "normalizer": NFC for Qwen2,
  // GPT-NeoX, Command-R).
  UnicodeNormalization normalization = UnicodeNormalization::kNone;

  TokenizerPipeline& add_step(PreTokenizeStep step) {
    pre_tokenizer.steps.push_back(std::move(step));
    return *this;
  }
  TokenizerPipeline& set_ignore_merges(bool v) {
    ignore_merges = v;
    return *this;
  }

  // The pipeline for a tokenizer.ggml.pre name as llama.cpp spells it
  // ("gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "tekken", ... and the
  // older "gpt2"): the pre-tokenizer of that family's tokenizer.json
  // (pre_tokenizer_names.cpp; docs/tokenizer.md lists them). Throws LoadError
  // naming the name, and listing the known ones when it is unknown.
  static TokenizerPipeline for_pre_name(const std::string& name);
  // Every name for_pre_name accepts.
  static std::vector<std::string> known_pre_names();
};

// The GPT-2 split regex, as Hugging Face's ByteLevel pre-tokenizer applies it.
extern const char* const kGpt2SplitPattern;

}  // namespace nnsight
