#include "core/tokenizer/pre_tokenizer.h"

#include <c10/util/Exception.h>
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <nnsight/error.hpp>
#include <utility>

#include "core/tokenizer/byte_level.h"

#include "core/tokenizer/onig_compat.h"
#include "core/tokenizer/utf8.h"

namespace nnsight {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? "PCRE2 error " + std::to_string(code)
               : std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Largest JIT stack used when the default 32 KiB machine-stack area overflows
// (deeply backtracking patterns on long pieces).
constexpr size_t kBigJitStackBytes = size_t{64} << 20;

}  // namespace

PreTokenizeStep PreTokenizeStep::split(std::string pattern, SplitBehavior behavior, bool invert) {
  PreTokenizeStep s;
  s.kind = Kind::kSplit;
  s.pattern = std::move(pattern);
  s.behavior = behavior;
  s.invert = invert;
  return s;
}

PreTokenizeStep PreTokenizeStep::split_literal(std::string text, SplitBehavior behavior, bool invert) {
  PreTokenizeStep s = split(std::move(text), behavior, invert);
  s.literal = true;
  return s;
}

PreTokenizeStep PreTokenizeStep::prefix_space() {
  PreTokenizeStep s;
  s.kind = Kind::kPrefixSpace;
  return s;
}

PreTokenizerScratch::PreTokenizerScratch() : match_data_(pcre2_match_data_create(1, nullptr)) {
  TORCH_CHECK(match_data_ != nullptr, "pcre2_match_data_create failed");
}

PreTokenizerScratch::~PreTokenizerScratch() {
  pcre2_match_data_free(match_data_);
  pcre2_match_context_free(big_stack_context_);
  pcre2_jit_stack_free(big_stack_);
}

PreTokenizer::PreTokenizer(PreTokenizerConfig config) : config_(std::move(config)) {
  codes_.reserve(config_.steps.size());
  // Steps on the byte alphabet may cut a character in two; a step on the
  // text itself must not see such a piece.
  bool byte_level_seen = false;
  for (size_t i = 0; i < config_.steps.size(); ++i) {
    const PreTokenizeStep& step = config_.steps[i];
    if (byte_level_seen && step.kind == PreTokenizeStep::Kind::kSplit && !step.byte_level_view) {
      throw LoadError("pre-tokenizer step " + std::to_string(i) +
                      " runs on the text but follows a step on the byte alphabet");
    }
    byte_level_seen = byte_level_seen || step.byte_level_view;
  }
  try {
    for (size_t i = 0; i < config_.steps.size(); ++i) {
      const PreTokenizeStep& step = config_.steps[i];
      if (step.kind != PreTokenizeStep::Kind::kSplit) {
        codes_.push_back(nullptr);
        continue;
      }
      // PCRE2_LITERAL admits PCRE2_UTF but not PCRE2_UCP.
      const uint32_t options = step.literal ? (PCRE2_LITERAL | PCRE2_UTF) : (PCRE2_UTF | PCRE2_UCP);
      const std::string pattern = step.literal ? step.pattern : onig_to_pcre2(step.pattern);
      int err = 0;
      PCRE2_SIZE err_offset = 0;
      pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                       &err_offset, nullptr);
      if (code == nullptr) {
        // The offset is into the rewritten pattern when it differs.
        throw LoadError("pre-tokenizer step " + std::to_string(i) + ": pattern '" + step.pattern +
                        "' does not compile" + (pattern == step.pattern ? "" : " (as '" + pattern + "')") +
                        " at offset " + std::to_string(err_offset) + ": " + pcre2_message(err));
      }
      codes_.push_back(code);
      // JIT is an optimisation only: when unavailable, pcre2_match interprets.
      (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    }
  } catch (...) {
    for (pcre2_code* c : codes_) pcre2_code_free(c);
    throw;
  }
}

PreTokenizer::~PreTokenizer() {
  for (pcre2_code* c : codes_) pcre2_code_free(c);
}

PreTokenizer::PreTokenizer(PreTokenizer&& o) noexcept : config_(std::move(o.config_)), codes_(std::move(o.codes_)) {
  o.codes_.clear();
}

PreTokenizer& PreTokenizer::operator=(PreTokenizer&& o) noexcept {
  if (this != &o) {
    for (pcre2_code* c : codes_) pcre2_code_free(c);
    config_ = std::move(o.config_);
    codes_ = std::move(o.codes_);
    o.codes_.clear();
  }
  return *this;
}

void PreTokenizer::split(std::string_view text, std::vector<Piece>& out, PreTokenizerScratch& scratch) const {
  // Cut the text into maximal well-formed UTF-8 runs (PCRE2 is told the
  // subject is valid, which also keeps each match O(match) rather than
  // re-validating the whole subject) and ill-formed sequences.
  for_each_utf8_run(
      text, [&](size_t b, size_t e) { split_valid_run(text, b, e, out, scratch); },
      [&](size_t b, size_t e) {
        out.push_back(Piece{b, e, false});
      });
}

void PreTokenizer::split_valid_run(std::string_view text, size_t begin, size_t end, std::vector<Piece>& out,
                                   PreTokenizerScratch& scratch) const {
  std::vector<Piece>& cur = scratch.current_;
  std::vector<Piece>& next = scratch.next_;
  cur.clear();
  cur.push_back(Piece{begin, end, false});
  for (size_t step = 0; step < config_.steps.size(); ++step) {
    if (config_.steps[step].kind == PreTokenizeStep::Kind::kPrefixSpace) {
      for (Piece& p : cur) {
        if (!p.space_prefix && (p.begin == p.end || text[p.begin] != ' ')) p.space_prefix = true;
      }
      continue;
    }
    next.clear();
    for (const Piece& p : cur) apply_split(step, text, p, next, scratch);
    std::swap(cur, next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

void PreTokenizer::apply_split(size_t step_index, std::string_view text, const Piece& piece, std::vector<Piece>& out,
                               PreTokenizerScratch& scratch) const {
  const PreTokenizeStep& step = config_.steps[step_index];
  pcre2_code* code = codes_[step_index];

  // The subject is the piece's text, with its virtual prefix space made real.
  std::string_view subject = text.substr(piece.begin, piece.end - piece.begin);
  if (piece.space_prefix) {
    scratch.subject_.assign(1, ' ');
    scratch.subject_.append(subject);
    subject = scratch.subject_;
  }
  // What the pattern runs on: the subject, or its byte-alphabet spelling.
  std::string_view haystack = subject;
  std::vector<size_t>& to_subject = scratch.mapped_to_subject_;
  if (step.byte_level_view) {
    static const std::array<std::string, 256> kSpelling = [] {
      std::array<std::string, 256> t;
      for (int b = 0; b < 256; ++b) t[size_t(b)] = utf8_encode(byte_level_code_point(static_cast<uint8_t>(b)));
      return t;
    }();
    scratch.mapped_.clear();
    to_subject.clear();
    for (size_t k = 0; k < subject.size(); ++k) {
      scratch.mapped_ += kSpelling[static_cast<uint8_t>(subject[k])];
      to_subject.resize(scratch.mapped_.size(), k);
    }
    to_subject.push_back(subject.size());
    haystack = scratch.mapped_;
  }
  auto subject_offset = [&](size_t h) { return step.byte_level_view ? to_subject[h] : h; };
  const size_t n = haystack.size();
  const auto* s = reinterpret_cast<PCRE2_SPTR>(haystack.data());

  auto match_at = [&](size_t start) {
    int rc = pcre2_match(code, s, n, start, PCRE2_NO_UTF_CHECK, scratch.match_data_, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      if (scratch.big_stack_context_ == nullptr) {
        scratch.big_stack_ = pcre2_jit_stack_create(32 * 1024, kBigJitStackBytes, nullptr);
        scratch.big_stack_context_ = pcre2_match_context_create(nullptr);
        TORCH_CHECK(scratch.big_stack_ && scratch.big_stack_context_, "PCRE2 allocation failed");
        pcre2_jit_stack_assign(scratch.big_stack_context_, nullptr, scratch.big_stack_);
      }
      rc = pcre2_match(code, s, n, start, PCRE2_NO_UTF_CHECK, scratch.match_data_, scratch.big_stack_context_);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(code, s, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, scratch.match_data_, nullptr);
      }
    }
    return rc;
  };

  // Matches and the gaps between them, covering the subject, found the way
  // Hugging Face's Oniguruma iterator finds them: the next search starts where
  // the last match ended, and an empty match right at the end of the previous
  // match is skipped (the search moves on one character). Other empty matches
  // are kept: they cut the text there, as in Hugging Face.
  auto& segments = scratch.segments_;
  segments.clear();
  size_t prev = 0;            // end of the last segment
  size_t search = 0;          // where the next search starts
  bool have_match = false;    // a match has been accepted
  size_t last_match_end = 0;  // ... and where it ended
  while (search <= n) {
    const int rc = match_at(search);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // rc == 0 only means the ovector has no room for capture groups; the
    // whole-match pair is still set.
    if (rc < 0) {
      throw Error("tokenizer: pre-tokenizer pattern '" + step.pattern + "' failed on input bytes [" +
                  std::to_string(piece.begin) + ", " + std::to_string(piece.end) + "): " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.match_data_);
    const size_t mb = ov[0], me = ov[1];
    TORCH_CHECK(mb <= me && me <= n, "PCRE2 returned a match outside the subject");
    if (mb == me && have_match && last_match_end == me) {
      if (search >= n) break;
      search += utf8_step(haystack.substr(search)).length;
      continue;
    }
    if (mb > prev) segments.push_back({subject_offset(prev), subject_offset(mb), false});
    segments.push_back({subject_offset(mb), subject_offset(me), true});
    prev = search = last_match_end = me;
    have_match = true;
  }
  if (prev < n) segments.push_back({subject_offset(prev), subject.size(), false});
  if (step.invert) {
    for (auto& seg : segments) seg.is_match = !seg.is_match;
  }

  // The behaviours, as Hugging Face folds them: a delimiter merges with its
  // neighbour only when that neighbour is not itself a delimiter. Empty
  // ranges take part in the fold and are dropped afterwards.
  auto& ranges = scratch.ranges_;
  ranges.clear();
  switch (step.behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& seg : segments) ranges.emplace_back(seg.begin, seg.end);
      break;
    case SplitBehavior::kRemoved:
      for (const auto& seg : segments) {
        if (!seg.is_match) ranges.emplace_back(seg.begin, seg.end);
      }
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& seg : segments) {
        if (seg.is_match && !previous_match && !ranges.empty()) {
          ranges.back().second = seg.end;
        } else {
          ranges.emplace_back(seg.begin, seg.end);
        }
        previous_match = seg.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // Right to left: a delimiter joins the piece after it.
      bool previous_match = false;
      for (size_t k = segments.size(); k-- > 0;) {
        const auto& seg = segments[k];
        if (seg.is_match && !previous_match && !ranges.empty()) {
          ranges.back().first = seg.begin;
        } else {
          ranges.emplace_back(seg.begin, seg.end);
        }
        previous_match = seg.is_match;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& seg : segments) {
        if (seg.is_match == previous_match && !ranges.empty()) {
          ranges.back().second = seg.end;
        } else {
          ranges.emplace_back(seg.begin, seg.end);
        }
        previous_match = seg.is_match;
      }
      break;
    }
  }

  // Subject coordinates -> pieces of the original text.
  for (const auto& [b, e] : ranges) {
    if (e <= b) continue;
    if (!piece.space_prefix) {
      out.push_back(Piece{piece.begin + b, piece.begin + e, false});
    } else if (b == 0) {
      out.push_back(Piece{piece.begin, piece.begin + e - 1, true});
    } else {
      out.push_back(Piece{piece.begin + b - 1, piece.begin + e - 1, false});
    }
  }
}

}  // namespace nnsight
