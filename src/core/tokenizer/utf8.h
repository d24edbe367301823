// UTF-8 sequence classification, shared by the pre-tokenizer (which must cut
// arbitrary input bytes into valid runs before PCRE2 sees them) and the stream
// decoder (which must hold back sequences that are not complete yet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nnsight {

enum class Utf8Status {
  kValid,       // a whole well-formed sequence
  kInvalid,     // ill-formed; `length` is its maximal subpart (Unicode ch. 3, "U+FFFD substitution")
  kIncomplete,  // well-formed so far but cut off by the end of the input
};

struct Utf8Step {
  Utf8Status status;
  size_t length;  // bytes consumed (>= 1 for non-empty input)
};

// Classifies the sequence that starts at bytes[0] (bytes must be non-empty),
// following the well-formed byte ranges of Unicode Table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF.
Utf8Step utf8_step(std::string_view bytes);

// Number of leading bytes of `bytes` that form complete, well-formed UTF-8.
size_t utf8_valid_prefix(std::string_view bytes);

// The UTF-8 encoding of code point `cp` (which must be a scalar value).
std::string utf8_encode(uint32_t cp);

// "\xEF\xBF\xBD", U+FFFD REPLACEMENT CHARACTER.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

}  // namespace nnsight
