// Metaspace: Hugging Face's pre-tokenizer for SentencePiece-style
// vocabularies. It replaces every ' ' with the replacement character
// ("▁"), prepends one to the text (always, only to the first stretch of the
// input, or never), and optionally splits before each replacement.
#pragma once

#include <string>
#include <string_view>

namespace nnsight {

enum class PrependScheme {
  kAlways,  // every stretch of text between special tokens
  kFirst,   // only the stretch that starts the input
  kNever,
};

struct Metaspace {
  std::string replacement = "\xE2\x96\x81";  // U+2581 "▁"
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;  // split before each replacement (merged with the next piece)

  // Rewrites `text` into `out`: spaces replaced, and the replacement
  // prepended as the scheme says unless the result already starts with it.
  // `at_input_start`: whether `text` begins at offset 0 of the input.
  void apply(std::string_view text, bool at_input_start, std::string& out) const;
};

// "always" / "first" / "never"; false for anything else.
bool parse_prepend_scheme(std::string_view name, PrependScheme& out);

}  // namespace nnsight
