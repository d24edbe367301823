// SpmModel: SentencePiece's BPE encoding, as sentencepiece's bpe_model.cc
// and llama.cpp's "llama" (SPM) vocabularies run it. A piece of normalized
// text ("▁Hello▁world") starts as one symbol per character; the adjacent pair
// whose concatenation is the vocabulary piece with the highest score is
// merged, leftmost first among equal scores, until no pair forms a piece.
// Symbols that end as no piece fall back to their UTF-8 bytes ("<0xE4>"...)
// when the vocabulary has byte tokens, else to the unknown token. A merge
// that lands on an unused piece is undone at the end (SentencePiece's
// "resegment").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nnsight {

// Per-call working memory; one per thread.
struct SpmScratch {
  struct Symbol {
    uint32_t begin, end;  // bytes of the piece
    int32_t prev, next;   // live neighbours, -1 at the ends
    int32_t left, right;  // the two symbols merged into this one (-1 for a character)
  };
  struct Candidate {
    float score;
    int32_t left, right;  // symbol indices
    uint32_t size;        // bytes of the merged piece, to recognise stale entries
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class SpmModel {
 public:
  SpmModel() = default;
  // `pieces[i]` is token i's spelling ("▁the", "<0x0A>"); `scores` one per
  // token; `types` GGUF token types (1 normal, 2 unknown, 3 control, 4
  // user-defined, 5 unused, 6 byte; 0 counts as normal). Normal,
  // user-defined and unused pieces can be merged into; byte tokens are found
  // by their "<0xXX>" spelling. unk_id may be -1.
  SpmModel(const std::vector<std::string>& pieces, const std::vector<float>& scores, const std::vector<int32_t>& types,
           int32_t unk_id, bool byte_fallback);
  SpmModel(const SpmModel&) = delete;
  SpmModel& operator=(const SpmModel&) = delete;

  // Appends the tokens of `piece` (non-empty normalized text) to `out`.
  // Throws nnsight::Error when a character has no token, no byte tokens and
  // there is no unknown token.
  void encode(std::string_view piece, std::vector<int32_t>& out, SpmScratch& scratch) const;

 private:
  void emit(std::string_view piece, const SpmScratch& scratch, int32_t symbol, std::vector<int32_t>& out) const;
  void emit_unknown(std::string_view bytes, std::vector<int32_t>& out) const;

  // Spellings of mergeable pieces live in `storage_`; the map keys view it.
  std::string storage_;
  std::unordered_map<std::string_view, int32_t> ids_;
  std::vector<float> scores_;
  std::vector<bool> unused_;
  int32_t byte_ids_[256];
  bool byte_fallback_ = false;
  int32_t unk_id_ = -1;
};

// The byte a "<0xXX>" spelling stands for, or -1.
int byte_token_value(std::string_view spelling);

}  // namespace nnsight
