#include "core/tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <nnsight/error.hpp>

namespace nnsight {

BpeModel::BpeModel(const std::array<int32_t, 256>& byte_tokens, const std::vector<BpeMerge>& merges, int32_t unk_id)
    : byte_tokens_(byte_tokens), unk_id_(unk_id) {
  size_t capacity = 16;
  int bits = 4;
  while (capacity < merges.size() * 2) capacity <<= 1, ++bits;
  slots_.assign(capacity, Slot{kEmpty, -1, -1});
  shift_ = 64 - bits;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    const uint64_t key = key_of(m.left, m.right);
    size_t i = slot_index(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (capacity - 1);
    if (slots_[i].key == key) continue;  // duplicate rule: the first rank wins
    slots_[i] = Slot{key, static_cast<int32_t>(rank), m.merged};
  }
}

const BpeModel::Slot* BpeModel::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = key_of(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = slot_index(key);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.key == key) return &s;
    if (s.key == kEmpty) return nullptr;
  }
}

int32_t BpeModel::rank(int32_t left, int32_t right) const {
  const Slot* s = find(left, right);
  return s ? s->rank : -1;
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const {
  using Symbol = BpeScratch::Symbol;
  const int32_t n = static_cast<int32_t>(piece.size());
  auto& syms = scratch.symbols;
  syms.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const uint8_t b = static_cast<uint8_t>(piece[static_cast<size_t>(i)]);
    int32_t id = byte_tokens_[b];
    if (id < 0) {
      if (unk_id_ < 0) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02X", b);
        throw Error(std::string("tokenizer: byte ") + hex +
                    " has no token in the vocabulary and there is no unknown token");
      }
      id = unk_id_;
    }
    syms[static_cast<size_t>(i)] = Symbol{id, i - 1, i + 1 < n ? i + 1 : -1};
  }
  merge(out, scratch);
}

void BpeModel::encode_ids(const int32_t* ids, int32_t n, std::vector<int32_t>& out, BpeScratch& scratch) const {
  auto& syms = scratch.symbols;
  syms.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    syms[static_cast<size_t>(i)] = BpeScratch::Symbol{ids[i], i - 1, i + 1 < n ? i + 1 : -1};
  }
  merge(out, scratch);
}

void BpeModel::merge(std::vector<int32_t>& out, BpeScratch& scratch) const {
  using Candidate = BpeScratch::Candidate;
  using Symbol = BpeScratch::Symbol;
  auto& syms = scratch.symbols;
  const int32_t n = static_cast<int32_t>(syms.size());
  if (n == 1) {
    out.push_back(syms[0].id);
    return;
  }

  // Min-heap on (rank, left position): the lowest rank first and, among
  // equal ranks (the same rule at several places), the leftmost.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  auto& heap = scratch.heap;
  heap.clear();
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = syms[static_cast<size_t>(left)].next;
    if (right < 0) return;
    const int32_t lid = syms[static_cast<size_t>(left)].id;
    const int32_t rid = syms[static_cast<size_t>(right)].id;
    const Slot* s = find(lid, rid);
    if (s == nullptr) return;
    heap.push_back(Candidate{s->rank, left, lid, rid, s->merged});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = syms[static_cast<size_t>(c.left)];
    // Stale if either side has changed since the entry was pushed. A symbol's
    // token only ever grows, so equal ids mean the same pair is still there.
    if (left.id != c.left_id || left.next < 0) continue;
    Symbol& right = syms[static_cast<size_t>(left.next)];
    if (right.id != c.right_id) continue;
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = c.left;
    push_pair(left.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
    out.push_back(syms[static_cast<size_t>(i)].id);
  }
}

}  // namespace nnsight
