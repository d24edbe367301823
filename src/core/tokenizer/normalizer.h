// Normalizer: the text rewrites a SentencePiece-style tokenizer applies to
// each stretch of text between special tokens before splitting it -- Hugging
// Face's Prepend and Replace normalizers (and a Sequence of them), which is
// also how SentencePiece's own whitespace escaping ("a b" -> "▁a▁b") and
// dummy prefix are expressed here.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nnsight {

struct NormalizeRule {
  enum class Kind {
    kPrepend,  // put `text` before a non-empty input
    kReplace,  // replace every match of `pattern` with `text`
  };
  Kind kind = Kind::kReplace;
  std::string pattern;  // literal text, or an Oniguruma regex when `regex`
  bool regex = false;
  std::string text;

  static NormalizeRule prepend(std::string text);
  static NormalizeRule replace(std::string pattern, std::string content);
  static NormalizeRule replace_regex(std::string pattern, std::string content);
};

class Normalizer {
 public:
  Normalizer() = default;
  // Compiles the regex rules; throws LoadError naming the pattern when one
  // does not compile or matches the empty string.
  explicit Normalizer(std::vector<NormalizeRule> rules);
  ~Normalizer();
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;

  // Applies the rules in order to `text`, leaving the result in `out`
  // (`tmp` is scratch space). `text` must be valid UTF-8 for regex rules.
  void apply(std::string_view text, std::string& out, std::string& tmp) const;

  bool empty() const { return rules_.empty(); }
  const std::vector<NormalizeRule>& rules() const { return rules_; }

 private:
  struct Compiled;
  std::vector<NormalizeRule> rules_;
  std::vector<std::unique_ptr<Compiled>> compiled_;  // per rule; null for literal ones
};

}  // namespace nnsight
