// Pre-tokenization: cutting text into the pieces that BPE merges within (BPE
// never merges across a piece boundary). A pre-tokenizer is a sequence of
// steps, each applied to every piece the previous step produced; this mirrors
// both llama.cpp (a list of regexes applied in turn) and Hugging Face
// `tokenizers` (a Sequence of Split / Digits / ByteLevel pre-tokenizers).
// Regexes are written in the Oniguruma dialect of tokenizer.json files,
// adapted by onig_to_pcre2, and run on PCRE2 with UTF and Unicode
// properties, compiled (and JITed) once per PreTokenizer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_match_context_8;
struct pcre2_real_jit_stack_8;

namespace nnsight {

// What happens to the text a split pattern matches (Hugging Face's
// SplitDelimiterBehavior; Isolated is what GPT-2-style regexes use).
enum class SplitBehavior {
  kIsolated,            // matches and the text between them all become pieces
  kRemoved,             // matches are dropped
  kMergedWithPrevious,  // a match is glued to the piece before it
  kMergedWithNext,      // a match is glued to the piece after it
  kContiguous,          // adjacent matches form one piece
};

struct PreTokenizeStep {
  enum class Kind {
    kSplit,        // split every piece on `pattern`
    kPrefixSpace,  // prepend ' ' to every piece not already starting with one
  };
  Kind kind = Kind::kSplit;
  std::string pattern;                                // regex, Oniguruma dialect (or literal text when `literal`)
  bool literal = false;                               // `pattern` is plain text, not a regex
  SplitBehavior behavior = SplitBehavior::kIsolated;  // fate of the matched text
  bool invert = false;                                // split on what the pattern does NOT match
  // The pattern sees the piece as Hugging Face's ByteLevel pre-tokenizer has
  // mapped it (every byte one code point of the GPT-2 byte alphabet: "é" is
  // "Ã©"), as a Split or Digits placed after ByteLevel does (Falcon).
  bool byte_level_view = false;

  static PreTokenizeStep split(std::string pattern, SplitBehavior behavior = SplitBehavior::kIsolated,
                               bool invert = false);
  static PreTokenizeStep split_literal(std::string text, SplitBehavior behavior, bool invert);
  static PreTokenizeStep prefix_space();
};

struct PreTokenizerConfig {
  std::vector<PreTokenizeStep> steps;  // applied in order; none = the whole text is one piece
};

// One pre-tokenized piece: bytes [begin, end) of the input, preceded by a
// virtual ' ' when `space_prefix` (set by a kPrefixSpace step).
struct Piece {
  size_t begin = 0;
  size_t end = 0;
  bool space_prefix = false;
};

// Per-call working memory (PCRE2 match data, piece buffers). Not thread-safe:
// use one per thread; reusing it across calls avoids allocations.
class PreTokenizerScratch {
 public:
  PreTokenizerScratch();
  ~PreTokenizerScratch();
  PreTokenizerScratch(const PreTokenizerScratch&) = delete;
  PreTokenizerScratch& operator=(const PreTokenizerScratch&) = delete;

 private:
  friend class PreTokenizer;
  pcre2_real_match_data_8* match_data_ = nullptr;
  pcre2_real_match_context_8* big_stack_context_ = nullptr;  // made on first JIT stack overflow
  pcre2_real_jit_stack_8* big_stack_ = nullptr;
  struct Segment {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Segment> segments_;  // one split's matches and gaps, in subject coordinates
  std::vector<Piece> current_, next_;
  std::string subject_;                            // " " + piece text, for pieces with a virtual prefix space
  std::string mapped_;                             // the subject in the byte alphabet (byte_level_view steps)
  std::vector<size_t> mapped_to_subject_;          // byte offset in mapped_ -> byte offset in the subject
  std::vector<std::pair<size_t, size_t>> ranges_;  // one split's output pieces, subject coordinates
};

class PreTokenizer {
 public:
  // Compiles every pattern; throws LoadError naming the pattern and the
  // PCRE2 error (with its offset) when one does not compile.
  explicit PreTokenizer(PreTokenizerConfig config);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of `text` to `out`, in order. `text` may hold any
  // bytes: ill-formed UTF-8 is cut out first and each ill-formed sequence
  // (maximal subpart) becomes a piece of its own, untouched by the steps, so
  // that byte-level BPE still round-trips it. Pieces are never empty (a piece
  // with a virtual prefix space may have begin == end).
  void split(std::string_view text, std::vector<Piece>& out, PreTokenizerScratch& scratch) const;

  const PreTokenizerConfig& config() const { return config_; }

 private:
  void apply_split(size_t step, std::string_view text, const Piece& piece, std::vector<Piece>& out,
                   PreTokenizerScratch& scratch) const;
  void split_valid_run(std::string_view text, size_t begin, size_t end, std::vector<Piece>& out,
                       PreTokenizerScratch& scratch) const;

  PreTokenizerConfig config_;
  std::vector<pcre2_real_code_8*> codes_;  // per step; null for kPrefixSpace
};

}  // namespace nnsight
