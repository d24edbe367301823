#include "core/tokenizer/tokenizer.h"

#include <array>
#include <climits>
#include <mutex>
#include <nnsight/error.hpp>
#include <unordered_map>
#include <utility>

#include "core/tokenizer/bpe.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/special_token_matcher.h"
#include "core/tokenizer/spm_encoder.h"
#include "core/tokenizer/unicode_normalizer.h"
#include "core/tokenizer/utf8.h"

namespace nnsight {
namespace {

// GGUF token types (tokenizer.ggml.token_type); 0 is "undefined".
constexpr int32_t kTypeUnknown = 2;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeUserDefined = 4;
constexpr int32_t kMaxTokenType = 6;
constexpr uint8_t kLstrip = 1, kRstrip = 2;

// Length of the Unicode White_Space character at text[pos], or 0 (what
// Hugging Face's lstrip / rstrip remove: Rust's char::is_whitespace).
size_t whitespace_at(std::string_view text, size_t pos) {
  const uint8_t c = static_cast<uint8_t>(text[pos]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return 1;
  if (c < 0x80) return 0;
  const Utf8Step st = utf8_step(text.substr(pos));
  if (st.status != Utf8Status::kValid) return 0;
  uint32_t cp = 0;
  if (st.length == 2) cp = (uint32_t(c & 0x1F) << 6) | (uint8_t(text[pos + 1]) & 0x3F);
  if (st.length == 3) {
    cp = (uint32_t(c & 0x0F) << 12) | (uint32_t(uint8_t(text[pos + 1]) & 0x3F) << 6) | (uint8_t(text[pos + 2]) & 0x3F);
  }
  const bool ws = cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
                  cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
  return ws ? st.length : 0;
}

// Pieces up to this many bytes have their BPE result cached: that covers
// nearly every word, while a long run (a line of '=' signs, base64) is not
// worth keeping.
constexpr size_t kMaxCachedPieceBytes = 64;
// The cache is dropped wholesale when it reaches this many entries, bounding
// its memory (~10 MB) without bookkeeping on the hot path.
constexpr size_t kMaxCacheEntries = size_t{1} << 16;

[[noreturn]] void load_fail(const std::string& source, const std::string& what) {
  throw LoadError(source + ": " + what);
}

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  TokenizerPipeline pipeline;
  std::vector<std::string> tokens;  // stored spellings
  std::vector<int32_t> types;       // per id; 1 when the spec gave none
  // Raw bytes of token i: bytes[offsets[i], offsets[i + 1]).
  std::string bytes;
  std::vector<size_t> offsets;
  std::unordered_map<std::string, int32_t> id_by_string;
  // Raw bytes -> id of ordinary tokens, for ignore_merges (empty otherwise).
  std::unordered_map<std::string, int32_t> id_by_bytes;
  SpecialTokenMatcher specials;
  PreTokenizer pre_tokenizer;
  BpeModel bpe;
  std::unique_ptr<SpmEncoder> spm;  // SentencePiece-style tokenizers only
  // Per id: kLstrip / kRstrip (empty when no token strips).
  std::vector<uint8_t> strip;
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false;
  std::string bos_token, eos_token, chat_template;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  explicit Impl(PreTokenizerConfig pre) : pre_tokenizer(std::move(pre)) {}

  std::string_view token_bytes(int32_t id) const {
    return std::string_view(bytes).substr(offsets[size_t(id)], offsets[size_t(id) + 1] - offsets[size_t(id)]);
  }
  bool is_control(int32_t id) const { return types[size_t(id)] == kTypeControl; }

  struct Scratch {
    PreTokenizerScratch pre;
    BpeScratch bpe;
    std::vector<Piece> pieces;
    std::string piece_bytes;  // a piece with its virtual prefix space, or a lookup key
    std::string normalized;   // the text between special tokens, normalized
  };

  void encode_piece(std::string_view piece, std::vector<int32_t>& out, Scratch& s) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out, Scratch& s) const;
};

void Tokenizer::Impl::encode_piece(std::string_view piece, std::vector<int32_t>& out, Scratch& s) const {
  if (pipeline.ignore_merges) {
    s.piece_bytes.assign(piece.data(), piece.size());
    auto it = id_by_bytes.find(s.piece_bytes);
    if (it != id_by_bytes.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    bpe.encode(piece, out, s.bpe);
    return;
  }
  // Look up under the lock, but run BPE outside it.
  s.piece_bytes.assign(piece.data(), piece.size());  // reuses capacity: no allocation
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(s.piece_bytes);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  bpe.encode(piece, out, s.bpe);
  std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() >= kMaxCacheEntries) cache.clear();
  cache.emplace(s.piece_bytes, std::move(ids));
}

void Tokenizer::Impl::encode_ordinary(std::string_view text, std::vector<int32_t>& out, Scratch& s) const {
  s.pieces.clear();
  pre_tokenizer.split(text, s.pieces, s.pre);
  std::string with_space;
  for (const Piece& p : s.pieces) {
    std::string_view piece = text.substr(p.begin, p.end - p.begin);
    if (p.space_prefix) {
      with_space.assign(1, ' ');
      with_space.append(piece);
      piece = with_space;
    }
    if (!piece.empty()) encode_piece(piece, out, s);
  }
}

Tokenizer::Tokenizer(TokenizerSpec spec) {
  TokenizerPipeline pipeline;
  if (spec.model == "llama") {
    pipeline.spm = SpmPipeline::sentencepiece(spec.add_space_prefix);
    // SentencePiece matches user-defined pieces in the escaped text.
    for (size_t i = 0; i < spec.token_types.size(); ++i) {
      if (spec.token_types[i] == kTypeUserDefined) pipeline.spm->normalized_tokens.push_back(int32_t(i));
    }
  } else if (spec.model != "gpt2") {
    throw LoadError("tokenizer spec: unsupported tokenizer model '" + spec.model + "' (supported: gpt2, llama)");
  } else {
    try {
      pipeline = TokenizerPipeline::for_pre_name(spec.pre);
    } catch (const LoadError& e) {
      throw LoadError(std::string("tokenizer spec: ") + e.what());
    }
  }
  init(std::move(spec), std::move(pipeline), "tokenizer spec");
}

Tokenizer::Tokenizer(TokenizerSpec spec, TokenizerPipeline pipeline, std::string source) {
  init(std::move(spec), std::move(pipeline), source);
}

void Tokenizer::init(TokenizerSpec spec, TokenizerPipeline pipeline, const std::string& source) {
  auto fail = [&](const std::string& what) { load_fail(source, what); };

  const size_t n = spec.tokens.size();
  if (n == 0) fail("the vocabulary is empty");
  if (n > size_t(INT32_MAX)) fail("the vocabulary has more than 2^31 - 1 tokens");
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    fail("token_types has " + std::to_string(spec.token_types.size()) + " entries but the vocabulary has " +
         std::to_string(n) + " tokens");
  }
  auto check_id = [&](int32_t id, const char* what) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      fail(std::string(what) + " " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(n) + ")");
    }
  };
  check_id(spec.bos_id, "bos_id");
  check_id(spec.eos_id, "eos_id");
  check_id(spec.unk_id, "unk_id");
  check_id(spec.pad_id, "pad_id");
  if (spec.add_bos && spec.bos_id < 0) fail("add_bos is set but there is no BOS token");
  if (spec.add_eos && spec.eos_id < 0) fail("add_eos is set but there is no EOS token");
  const bool spm = pipeline.spm.has_value();
  if (spm && pipeline.spm->merge_by_score && spec.scores.size() != n) {
    fail("scores has " + std::to_string(spec.scores.size()) + " entries but the vocabulary has " + std::to_string(n) +
         " tokens");
  }
  std::vector<bool> normalized_token(spm ? n : 0, false);
  if (spm) {
    for (int32_t id : pipeline.spm->normalized_tokens) {
      if (id < 0 || size_t(id) >= n) fail("normalized added token id " + std::to_string(id) + " is out of range");
      normalized_token[size_t(id)] = true;
    }
  }

  PreTokenizerConfig pre_config = pipeline.pre_tokenizer;
  std::shared_ptr<Impl> m;
  try {
    m = std::make_shared<Impl>(std::move(pre_config));
  } catch (const LoadError& e) {
    fail(e.what());
  }
  m->source = source;
  m->pipeline = std::move(pipeline);
  m->bos = spec.bos_id;
  m->eos = spec.eos_id;
  m->unk = spec.unk_id;
  m->pad = spec.pad_id;
  m->add_bos = spec.add_bos;
  m->add_eos = spec.add_eos;

  m->types = spec.token_types.empty() ? std::vector<int32_t>(n, 1) : spec.token_types;
  m->offsets.reserve(n + 1);
  m->offsets.push_back(0);
  m->id_by_string.reserve(n);
  std::string raw;
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string& tok = spec.tokens[i];
    const int32_t type = m->types[i];
    if (type < 0 || type > kMaxTokenType) {
      fail("token " + std::to_string(i) + " ('" + tok + "') has unknown token type " + std::to_string(type));
    }
    if (!tok.empty()) m->id_by_string.emplace(tok, id);  // a spelling listed twice keeps its first id
    if (spm) {
      m->bytes += spm_token_bytes(tok, type);
      // Control, user-defined and unknown tokens are cut out of the input
      // whole, except those matched in the normalized text.
      const bool special = type == kTypeControl || type == kTypeUserDefined || type == kTypeUnknown;
      if (special && !normalized_token[i] && !tok.empty()) m->specials.add(tok, id);
    } else if (type == kTypeControl || type == kTypeUserDefined) {
      // Special tokens stand for their own text, not byte-level spellings.
      m->bytes += tok;
      m->specials.add(tok, id);
    } else if (byte_level_decode(tok, &raw)) {
      m->bytes += raw;
      if (m->pipeline.ignore_merges && !raw.empty()) m->id_by_bytes.emplace(raw, id);
    } else {
      // Not in the byte alphabet (e.g. an added token stored as plain text):
      // its text is its bytes, as Hugging Face's ByteLevel decoder does.
      m->bytes += tok;
      if (m->pipeline.ignore_merges) m->id_by_bytes.emplace(tok, id);
    }
    m->offsets.push_back(m->bytes.size());
  }

  // The initial symbols: one token per byte, looked up by its alphabet spelling.
  std::array<int32_t, 256> byte_tokens;
  for (int b = 0; b < 256; ++b) {
    auto it = m->id_by_string.find(utf8_encode(byte_level_code_point(uint8_t(b))));
    const bool ordinary =
        it != m->id_by_string.end() && !m->is_control(it->second) && m->types[size_t(it->second)] != kTypeUserDefined;
    byte_tokens[size_t(b)] = ordinary ? it->second : -1;
  }

  std::vector<BpeMerge> merges;
  merges.reserve(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& rule = spec.merges[rank];
    const std::string where = "merge #" + std::to_string(rank) + " '" + rule + "'";
    // Search from 1 so that a left side starting with a literal space still
    // splits at the separator.
    const size_t sep = rule.size() > 1 ? rule.find(' ', 1) : std::string::npos;
    if (sep == std::string::npos || sep + 1 >= rule.size()) {
      fail(where + " is not of the form 'left right'");
    }
    std::string left = rule.substr(0, sep);
    std::string right = rule.substr(sep + 1);
    // Tokens may themselves hold spaces (SentencePiece user-defined pieces
    // such as "  "): then the separator is the space whose sides are both
    // tokens and whose concatenation is one too.
    if (!m->id_by_string.count(left) || !m->id_by_string.count(right)) {
      for (size_t alt = rule.find(' ', sep + 1); alt != std::string::npos && alt + 1 < rule.size();
           alt = rule.find(' ', alt + 1)) {
        std::string l = rule.substr(0, alt), r = rule.substr(alt + 1);
        if (m->id_by_string.count(l) && m->id_by_string.count(r) && m->id_by_string.count(l + r)) {
          left = std::move(l);
          right = std::move(r);
          break;
        }
      }
    }
    auto lookup = [&](const std::string& tok, const char* role) {
      auto it = m->id_by_string.find(tok);
      if (it == m->id_by_string.end()) {
        fail(where + ": " + role + " token '" + tok + "' is not in the vocabulary");
      }
      return it->second;
    };
    const int32_t l = lookup(left, "left");
    const int32_t r = lookup(right, "right");
    joined = left;
    joined += right;
    const int32_t merged = lookup(joined, "merged");
    merges.push_back(BpeMerge{l, r, merged});
  }
  auto mark_strip = [&](const std::vector<int32_t>& ids, uint8_t flag, const char* what) {
    for (int32_t id : ids) {
      if (id < 0 || size_t(id) >= n) fail(std::string(what) + " token id " + std::to_string(id) + " is out of range");
      m->strip.resize(n, 0);
      m->strip[size_t(id)] |= flag;
    }
  };
  mark_strip(spec.lstrip_ids, kLstrip, "lstrip");
  mark_strip(spec.rstrip_ids, kRstrip, "rstrip");
  if (spm) {
    try {
      m->spm = std::make_unique<SpmEncoder>(*m->pipeline.spm, spec.tokens, m->types, spec.scores, merges, spec.unk_id,
                                            m->pipeline.ignore_merges);
    } catch (const LoadError& e) {
      fail(e.what());  // a regex of the normalizer or the splits
    }
  } else {
    m->bpe = BpeModel(byte_tokens, merges, spec.unk_id);
  }
  m->tokens = std::move(spec.tokens);
  if (m->bos >= 0) m->bos_token = std::string(m->token_bytes(m->bos));
  if (m->eos >= 0) m->eos_token = std::string(m->token_bytes(m->eos));
  m->chat_template = std::move(spec.chat_template);
  m->cache.reserve(1024);
  impl_ = std::move(m);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special_tokens && m.add_bos) out.push_back(m.bos);
  Impl::Scratch scratch;
  std::unique_ptr<SpmEncoderScratch> spm_scratch;
  if (m.spm) spm_scratch = std::make_unique<SpmEncoderScratch>();
  size_t pos = 0;
  while (pos < text.size()) {
    const SpecialTokenMatcher::Match match = m.specials.find(text, pos);
    size_t end = match.length > 0 ? match.begin : text.size();
    const uint8_t strip = match.length > 0 && !m.strip.empty() ? m.strip[size_t(match.id)] : 0;
    if (strip & kLstrip) {
      // The whitespace just before the token belongs to it.
      size_t run_start = end;  // start of the whitespace run that reaches `end`
      for (size_t i = pos; i < end;) {
        const size_t w = whitespace_at(text, i);
        if (w == 0) {
          run_start = end;
          i += 1;  // continuation bytes are never whitespace
        } else {
          if (run_start == end) run_start = i;
          i += w;
        }
      }
      end = run_start;
    }
    if (end > pos) {
      const std::string_view segment = text.substr(pos, end - pos);
      const bool changed = unicode_normalize(segment, m.pipeline.normalization, scratch.normalized);
      const std::string_view normalized = changed ? std::string_view(scratch.normalized) : segment;
      if (m.spm) {
        m.spm->encode(normalized, pos == 0, out, *spm_scratch);
      } else {
        m.encode_ordinary(normalized, out, scratch);
      }
    }
    if (match.length == 0) break;
    out.push_back(match.id);
    pos = match.begin + match.length;
    if (strip & kRstrip) {
      // And so does the whitespace just after it.
      while (pos < text.size()) {
        const size_t w = whitespace_at(text, pos);
        if (w == 0) break;
        pos += w;
      }
    }
  }
  if (add_special_tokens && m.add_eos) out.push_back(m.eos);
  return out;
}

namespace {

[[noreturn]] void bad_id(int32_t id, size_t n) {
  throw Error("tokenizer: token id " + std::to_string(id) + " is out of range [0, " + std::to_string(n) + ")");
}

}  // namespace

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  bool at_start = true;
  for (int32_t id : ids) append_decoded(id, skip_special_tokens, at_start, out);
  return out;
}

void Tokenizer::append_decoded(int32_t id, bool skip_special_tokens, bool& at_text_start, std::string& out) const {
  const Impl& m = *impl_;
  if (id < 0 || size_t(id) >= m.tokens.size()) bad_id(id, m.tokens.size());
  if (skip_special_tokens && m.is_control(id)) return;
  std::string_view bytes = m.token_bytes(id);
  if (at_text_start && m.pipeline.spm) {
    switch (m.pipeline.spm->leading_space) {
      case LeadingSpace::kKeep:
        break;
      case LeadingSpace::kStripOne:
        if (!bytes.empty() && bytes[0] == ' ') bytes.remove_prefix(1);
        break;
      case LeadingSpace::kMetaspaceFirstToken:
        // Every "▁" of the first token goes; a byte token's space stays.
        if (byte_token_value(m.tokens[size_t(id)]) < 0) {
          for (char c : bytes) {
            if (c != ' ') out.push_back(c);
          }
          at_text_start = false;
          return;
        }
        break;
    }
  }
  // The text has started once a token with bytes came, even if all of them
  // were the stripped space.
  if (!m.token_bytes(id).empty() ||
      (m.pipeline.spm && m.pipeline.spm->leading_space == LeadingSpace::kMetaspaceFirstToken)) {
    at_text_start = false;
  }
  out.append(bytes);
}

std::string_view Tokenizer::token_bytes_view(int32_t id) const {
  if (id < 0 || size_t(id) >= impl_->tokens.size()) bad_id(id, impl_->tokens.size());
  return impl_->token_bytes(id);
}

std::string Tokenizer::token_bytes(int32_t id) const { return std::string(token_bytes_view(id)); }

const std::string& Tokenizer::token_string(int32_t id) const {
  if (id < 0 || size_t(id) >= impl_->tokens.size()) bad_id(id, impl_->tokens.size());
  return impl_->tokens[size_t(id)];
}

int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
int32_t Tokenizer::unk_id() const { return impl_->unk; }
int32_t Tokenizer::pad_id() const { return impl_->pad; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->tokens.size() && impl_->is_control(id);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token_string) const {
  auto it = impl_->id_by_string.find(std::string(token_string));
  if (it == impl_->id_by_string.end()) return std::nullopt;
  return it->second;
}

const TokenizerPipeline& Tokenizer::pipeline() const { return impl_->pipeline; }

}  // namespace nnsight
