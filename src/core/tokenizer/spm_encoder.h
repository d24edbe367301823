// SpmEncoder: encodes the text between special tokens for a
// SentencePiece-style tokenizer (see spm_pipeline.h), with either
// SentencePiece's score merges (SpmModel) or Hugging Face's rank merges over
// characters with byte fallback (BpeModel on character ids).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/bpe.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/special_token_matcher.h"
#include "core/tokenizer/spm_model.h"
#include "core/tokenizer/spm_pipeline.h"

namespace nnsight {

// Per-call working memory; one per thread.
struct SpmEncoderScratch {
  std::string normalized, tmp, metaspaced;
  PreTokenizerScratch pre;
  std::vector<Piece> pieces;
  SpmScratch spm;
  BpeScratch bpe;
  std::vector<int32_t> ids;
};

class SpmEncoder {
 public:
  // `tokens`, `types`: the whole vocabulary (types as in TokenizerSpec,
  // never empty here). `scores` are used when pipeline.merge_by_score,
  // `merges` (rank order, resolved to ids) otherwise. Throws LoadError when a
  // regex does not compile.
  SpmEncoder(const SpmPipeline& pipeline, const std::vector<std::string>& tokens, const std::vector<int32_t>& types,
             const std::vector<float>& scores, const std::vector<BpeMerge>& merges, int32_t unk_id, bool ignore_merges);

  // Appends the tokens of `text` (input bytes between special tokens,
  // non-empty). `at_input_start`: whether `text` begins the input.
  void encode(std::string_view text, bool at_input_start, std::vector<int32_t>& out, SpmEncoderScratch& scratch) const;

 private:
  void encode_normalized(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                         SpmEncoderScratch& s) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out, SpmEncoderScratch& s) const;
  void encode_by_rank(std::string_view piece, std::vector<int32_t>& out, SpmEncoderScratch& s) const;

  SpmPipeline pipeline_;
  Normalizer normalizer_;
  PreTokenizer splitter_;
  SpecialTokenMatcher normalized_tokens_;
  std::unique_ptr<SpmModel> by_score_;
  // Rank merges: character spelling -> id, byte -> "<0xXX>" id.
  std::unique_ptr<BpeModel> by_rank_;
  std::unordered_map<std::string, int32_t> char_ids_;
  std::unordered_map<std::string, int32_t> whole_ids_;  // ignore_merges: piece -> id
  int32_t byte_ids_[256];
  int32_t unk_id_ = -1;
  bool ignore_merges_ = false;
};

// The bytes a SentencePiece-style token decodes to: "<0xXX>" byte tokens to
// their byte (unless `type` is control or user-defined), every "▁" to ' '.
std::string spm_token_bytes(const std::string& spelling, int32_t type);

}  // namespace nnsight
