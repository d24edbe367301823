#include "core/tokenizer/spm_encoder.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <nnsight/error.hpp>
#include <utility>

#include "core/tokenizer/utf8.h"

namespace nnsight {
namespace {

constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeUserDefined = 4;
constexpr int32_t kTypeUnused = 5;
constexpr const char* kSpaceMark = "\xE2\x96\x81";  // "▁"

PreTokenizerConfig splits_of(const SpmPipeline& p) {
  PreTokenizerConfig c;
  if (p.metaspace && p.metaspace->split) {
    c.steps.push_back(PreTokenizeStep::split_literal(p.metaspace->replacement, SplitBehavior::kMergedWithNext, false));
  }
  for (const PreTokenizeStep& s : p.splits.steps) c.steps.push_back(s);
  return c;
}

}  // namespace

SpmEncoder::SpmEncoder(const SpmPipeline& pipeline, const std::vector<std::string>& tokens,
                       const std::vector<int32_t>& types, const std::vector<float>& scores,
                       const std::vector<BpeMerge>& merges, int32_t unk_id, bool ignore_merges)
    : pipeline_(pipeline),
      normalizer_(pipeline.normalizer),
      splitter_(splits_of(pipeline)),
      unk_id_(unk_id),
      ignore_merges_(ignore_merges) {
  for (int32_t id : pipeline.normalized_tokens) normalized_tokens_.add(tokens[size_t(id)], id);
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  if (pipeline.merge_by_score) {
    by_score_ = std::make_unique<SpmModel>(tokens, scores, types, unk_id, pipeline.byte_fallback);
    return;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == kTypeUnused) continue;  // a hole in the vocabulary
    const std::string& t = tokens[i];
    if (!t.empty() && utf8_step(t).status == Utf8Status::kValid && utf8_step(t).length == t.size()) {
      char_ids_.emplace(t, int32_t(i));
    }
    if (ignore_merges) whole_ids_.emplace(t, int32_t(i));
    const int b = byte_token_value(t);
    if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = int32_t(i);
  }
  std::array<int32_t, 256> no_bytes;
  no_bytes.fill(-1);
  by_rank_ = std::make_unique<BpeModel>(no_bytes, merges, unk_id);
}

void SpmEncoder::encode(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                        SpmEncoderScratch& s) const {
  normalizer_.apply(text, s.normalized, s.tmp);
  const std::string_view norm = s.normalized;
  size_t pos = 0;
  while (pos < norm.size()) {
    const SpecialTokenMatcher::Match m = normalized_tokens_.find(norm, pos);
    const size_t end = m.length > 0 ? m.begin : norm.size();
    if (end > pos) encode_normalized(norm.substr(pos, end - pos), at_input_start && pos == 0, out, s);
    if (m.length == 0) break;
    out.push_back(m.id);
    pos = m.begin + m.length;
  }
}

void SpmEncoder::encode_normalized(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                                   SpmEncoderScratch& s) const {
  if (pipeline_.metaspace) {
    pipeline_.metaspace->apply(text, at_input_start, s.metaspaced);
    text = s.metaspaced;
  }
  if (splitter_.config().steps.empty()) {
    if (!text.empty()) encode_piece(text, out, s);
    return;
  }
  s.pieces.clear();
  splitter_.split(text, s.pieces, s.pre);
  for (const Piece& p : s.pieces) {
    TORCH_CHECK(!p.space_prefix, "SentencePiece-style splits never add a prefix space");
    if (p.end > p.begin) encode_piece(text.substr(p.begin, p.end - p.begin), out, s);
  }
}

void SpmEncoder::encode_piece(std::string_view piece, std::vector<int32_t>& out, SpmEncoderScratch& s) const {
  if (by_score_) {
    by_score_->encode(piece, out, s.spm);
    return;
  }
  encode_by_rank(piece, out, s);
}

void SpmEncoder::encode_by_rank(std::string_view piece, std::vector<int32_t>& out, SpmEncoderScratch& s) const {
  if (ignore_merges_) {
    s.tmp.assign(piece.data(), piece.size());
    auto it = whole_ids_.find(s.tmp);
    if (it != whole_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Hugging Face BPE: one symbol per character; a character outside the
  // vocabulary becomes its byte tokens, or the unknown token.
  auto& ids = s.ids;
  ids.clear();
  bool last_unknown = false;
  for (size_t pos = 0; pos < piece.size();) {
    const Utf8Step st = utf8_step(piece.substr(pos));
    const size_t len = st.status == Utf8Status::kValid ? st.length : 1;
    const std::string_view ch = piece.substr(pos, len);
    pos += len;
    s.tmp.assign(ch.data(), ch.size());
    auto it = char_ids_.find(s.tmp);
    if (it != char_ids_.end()) {
      ids.push_back(it->second);
      last_unknown = false;
      continue;
    }
    if (pipeline_.byte_fallback &&
        std::all_of(ch.begin(), ch.end(), [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (char c : ch) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      last_unknown = false;
      continue;
    }
    if (unk_id_ < 0) {
      throw Error("tokenizer: '" + std::string(ch) +
                  "' has no token in the vocabulary, no byte tokens and there is no unknown token");
    }
    if (!(pipeline_.fuse_unk && last_unknown)) ids.push_back(unk_id_);
    last_unknown = true;
  }
  if (!ids.empty()) by_rank_->encode_ids(ids.data(), int32_t(ids.size()), out, s.bpe);
}

std::string spm_token_bytes(const std::string& spelling, int32_t type) {
  if (type != kTypeControl && type != kTypeUserDefined) {
    const int b = byte_token_value(spelling);
    if (b >= 0) return std::string(1, char(b));
  }
  std::string out;
  out.reserve(spelling.size());
  for (size_t i = 0; i < spelling.size();) {
    if (spelling.compare(i, 3, kSpaceMark) == 0) {
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(spelling[i++]);
    }
  }
  return out;
}

}  // namespace nnsight
