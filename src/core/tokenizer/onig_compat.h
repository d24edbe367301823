// Tokenizer regexes are written for Oniguruma, which Hugging Face `tokenizers`
// runs; we run them on PCRE2. The syntax tokenizer files use is shared, but a
// few escapes mean different things:
//   \s  Oniguruma: Unicode White_Space. PCRE2 (UCP): also U+180E MONGOLIAN
//       VOWEL SEPARATOR, which Unicode dropped from White_Space in 6.3.
//   \h  Oniguruma: a hex digit. PCRE2: horizontal whitespace.
//   \p{Han} (any script) Oniguruma: the Script property. PCRE2 10.40 on: the
//       wider Script_Extensions, unless written \p{sc:Han}.
//   [a[bc]] Oniguruma: a nested set, the union. PCRE2: '[' is a literal.
// This rewrites those escapes (and \S, \H) into explicit classes, scripts
// into "sc:" form and flattens nested positive sets, so the pattern matches
// what Oniguruma would. Class intersection ("&&") is not rewritten. Remaining known differences: \w and \b
// (Oniguruma's "word" set is wider), \S inside a character class (left as
// is), and code points assigned after the Unicode version of the PCRE2 in use.
#pragma once

#include <string>
#include <string_view>

namespace nnsight {

std::string onig_to_pcre2(std::string_view pattern);

}  // namespace nnsight
