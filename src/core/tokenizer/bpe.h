// The BPE merge loop: turns one pre-tokenized piece (raw bytes) into token
// ids by starting from one token per byte and repeatedly applying the
// lowest-ranked merge present, leftmost first. Candidate pairs live in a
// binary heap and symbols in an index-linked list, so a piece of n bytes costs
// O(n log n) instead of the O(n^2) of rescanning for the best pair.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace nnsight {

// One merge rule: tokens `left` and `right`, when adjacent, become `merged`.
struct BpeMerge {
  int32_t left;
  int32_t right;
  int32_t merged;
};

// Per-call working memory; one per thread.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
  };
  struct Candidate {
    int32_t rank;
    int32_t left;                       // symbol index of the left side (its position orders ties)
    int32_t left_id, right_id, merged;  // to recognise stale entries
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  BpeModel() = default;
  // byte_tokens[b] is the token of the single byte b (-1 if the vocabulary
  // has none); merges are in rank order (earlier = applied first). A pair
  // listed twice keeps its first rank. unk_id (or -1) stands for bytes
  // without a token.
  BpeModel(const std::array<int32_t, 256>& byte_tokens, const std::vector<BpeMerge>& merges, int32_t unk_id);

  // Appends the tokens of `piece` (non-empty raw bytes) to `out`. Throws
  // nnsight::Error when a byte has no token and there is no unknown token.
  void encode(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const;
  // The same from given initial tokens (n >= 1) instead of one per byte
  // (SentencePiece-style vocabularies start from characters).
  void encode_ids(const int32_t* ids, int32_t n, std::vector<int32_t>& out, BpeScratch& scratch) const;

  // The rank of merging tokens (left, right), or -1 when there is no such rule.
  int32_t rank(int32_t left, int32_t right) const;

 private:
  struct Slot {
    uint64_t key;  // kEmpty or (left << 32 | right)
    int32_t rank;
    int32_t merged;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t key_of(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
  size_t slot_index(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  const Slot* find(int32_t left, int32_t right) const;
  // Runs the merges over scratch.symbols (n >= 1 of them) and appends the result.
  void merge(std::vector<int32_t>& out, BpeScratch& scratch) const;

  std::array<int32_t, 256> byte_tokens_{};
  int32_t unk_id_ = -1;
  // Open-addressing hash table (linear probing, load <= 1/2) of merge rules:
  // the merge loop looks pairs up constantly and this keeps each lookup to
  // one or two cache lines.
  std::vector<Slot> slots_;
  int shift_ = 64;
};

}  // namespace nnsight
