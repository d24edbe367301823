// SpmPipeline: how a SentencePiece-style tokenizer (vocabulary pieces
// spelled with "▁" for spaces, "<0xXX>" byte-fallback tokens) turns text into
// tokens and tokens back into text. Three sources describe one:
//   - GGUF vocabularies with tokenizer.ggml.model = "llama" (Llama 2,
//     Mistral, Phi-3, Gemma) and SentencePiece tokenizer.model files: merges
//     by piece score, SentencePiece's whitespace escaping and dummy prefix;
//   - Hugging Face tokenizer.json files with a BPE model that has
//     byte_fallback: merges by rank, Prepend / Replace normalizers, the
//     Metaspace pre-tokenizer and the matching decoders.
// For each stretch of text between special tokens, encoding runs:
// normalizer -> added tokens matched on the normalized text -> Metaspace ->
// split steps -> the model on each piece.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tokenizer/metaspace.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/pre_tokenizer.h"

namespace nnsight {

// What decoding does to the start of the text.
enum class LeadingSpace {
  kKeep,
  // Drop one leading space of the decoded text: SentencePiece's and
  // llama.cpp's removal of the dummy prefix, Hugging Face's Strip(" ", 1, 0)
  // decoder after Fuse.
  kStripOne,
  // Drop every "▁" of the first token: Hugging Face's Metaspace decoder.
  kMetaspaceFirstToken,
};

struct SpmPipeline {
  // true: SentencePiece merges (highest-scoring piece first, any adjacent
  // pair whose concatenation is a piece; scores in TokenizerSpec::scores).
  // false: Hugging Face BPE merges by rank (TokenizerSpec::merges).
  bool merge_by_score = true;
  bool byte_fallback = true;  // unknown characters become their <0xXX> byte tokens
  bool fuse_unk = false;      // consecutive unknown tokens become one (Hugging Face fuse_unk)
  std::vector<NormalizeRule> normalizer;
  std::optional<Metaspace> metaspace;
  PreTokenizerConfig splits;  // run on the normalized, metaspaced text
  // Added tokens matched on the normalized text rather than the input
  // (SentencePiece user-defined pieces; tokenizer.json "normalized": true).
  std::vector<int32_t> normalized_tokens;
  LeadingSpace leading_space = LeadingSpace::kKeep;

  // SentencePiece / llama.cpp: spaces escaped as "▁"; with add_dummy_prefix,
  // "▁" put before every stretch of text between special tokens.
  static SpmPipeline sentencepiece(bool add_dummy_prefix);
};

}  // namespace nnsight
