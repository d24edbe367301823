#include "core/tokenizer/spm_model.h"

#include <algorithm>
#include <cstdio>
#include <nnsight/error.hpp>

#include "core/tokenizer/utf8.h"

namespace nnsight {
namespace {

constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeUserDefined = 4;
constexpr int32_t kTypeUnused = 5;
constexpr int32_t kTypeByte = 6;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int byte_token_value(std::string_view s) {
  if (s.size() != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
  const int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

SpmModel::SpmModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
                   const std::vector<int32_t>& types, int32_t unk_id, bool byte_fallback)
    : scores_(scores), byte_fallback_(byte_fallback), unk_id_(unk_id) {
  const size_t n = pieces.size();
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  unused_.assign(n, false);
  auto mergeable = [&](size_t i) {
    const int32_t t = types.empty() ? kTypeNormal : types[i];
    return t == 0 || t == kTypeNormal || t == kTypeUserDefined || t == kTypeUnused;
  };
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (mergeable(i)) total += pieces[i].size();
  }
  storage_.reserve(total);  // the views below must not move
  std::vector<size_t> offsets(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!mergeable(i)) continue;
    offsets[i] = storage_.size();
    storage_ += pieces[i];
  }
  ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = types.empty() ? kTypeNormal : types[i];
    if (mergeable(i)) {
      if (!pieces[i].empty()) {
        ids_.emplace(std::string_view(storage_).substr(offsets[i], pieces[i].size()), int32_t(i));  // first id wins
      }
      unused_[i] = t == kTypeUnused;
    }
    // Byte tokens: the type when there are types (GGUF, .model), the
    // spelling alone otherwise (tokenizer.json, whose vocab has no types).
    const int b = byte_token_value(pieces[i]);
    if (b >= 0 && (types.empty() || t == kTypeByte || t == kTypeNormal || t == 0) && byte_ids_[b] < 0) {
      byte_ids_[b] = int32_t(i);
    }
  }
}

void SpmModel::emit_unknown(std::string_view bytes, std::vector<int32_t>& out) const {
  if (byte_fallback_) {
    bool all = true;
    for (char c : bytes) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (all) {
      for (char c : bytes) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      return;
    }
  }
  if (unk_id_ < 0) {
    throw Error("tokenizer: '" + std::string(bytes) +
                "' has no token in the vocabulary, no byte tokens and there is no unknown token");
  }
  out.push_back(unk_id_);
}

void SpmModel::emit(std::string_view piece, const SpmScratch& s, int32_t i, std::vector<int32_t>& out) const {
  const SpmScratch::Symbol& sym = s.symbols[size_t(i)];
  const std::string_view text = piece.substr(sym.begin, sym.end - sym.begin);
  auto it = ids_.find(text);
  if (it == ids_.end()) {
    emit_unknown(text, out);
    return;
  }
  if (unused_[size_t(it->second)] && sym.left >= 0) {
    // SentencePiece never outputs unused pieces: split back into what formed it.
    emit(piece, s, sym.left, out);
    emit(piece, s, sym.right, out);
    return;
  }
  out.push_back(it->second);
}

void SpmModel::encode(std::string_view piece, std::vector<int32_t>& out, SpmScratch& s) const {
  using Symbol = SpmScratch::Symbol;
  using Candidate = SpmScratch::Candidate;
  auto& syms = s.symbols;
  syms.clear();
  for (size_t pos = 0; pos < piece.size();) {
    // One character per symbol; an ill-formed byte is a symbol of its own
    // (and falls back to its byte token).
    const Utf8Step st = utf8_step(piece.substr(pos));
    const size_t len = st.status == Utf8Status::kValid ? st.length : 1;
    const int32_t index = int32_t(syms.size());
    syms.push_back(Symbol{uint32_t(pos), uint32_t(pos + len), index - 1, -1, -1, -1});
    if (index > 0) syms[size_t(index) - 1].next = index;
    pos += len;
  }
  const int32_t n = int32_t(syms.size());

  // Max-heap on (score, -left): the best piece first and, among equal
  // scores, the leftmost pair.
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  auto& heap = s.heap;
  heap.clear();
  auto push_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = syms[size_t(left)];
    const Symbol& r = syms[size_t(right)];
    auto it = ids_.find(piece.substr(l.begin, r.end - l.begin));
    if (it == ids_.end()) return;
    heap.push_back(Candidate{scores_[size_t(it->second)], left, right, r.end - l.begin});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = syms[size_t(c.left)];
    Symbol& r = syms[size_t(c.right)];
    // Stale when either side was merged away or has grown since the push.
    if (l.begin == l.end || r.begin == r.end || l.next != c.right || r.end - l.begin != c.size) continue;
    auto it = ids_.find(piece.substr(l.begin, r.end - l.begin));
    if (unused_[size_t(it->second)]) {
      // Keep what formed it, for resegmenting at the end.
      const int32_t copy = int32_t(syms.size());
      const Symbol left_copy = l, right_copy = r;
      syms.push_back(left_copy);
      syms.push_back(right_copy);
      Symbol& l2 = syms[size_t(c.left)];
      l2.left = copy;
      l2.right = copy + 1;
    } else {
      syms[size_t(c.left)].left = -1;
    }
    Symbol& left = syms[size_t(c.left)];
    Symbol& right = syms[size_t(c.right)];
    left.end = right.end;
    left.next = right.next;
    if (right.next >= 0) syms[size_t(right.next)].prev = c.left;
    right.begin = right.end;  // dead
    push_pair(left.prev, c.left);
    push_pair(c.left, left.next);
  }
  if (n == 0) return;
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) emit(piece, s, i, out);
}

}  // namespace nnsight
