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

// Cuts `text` into maximal well-formed runs and ill-formed sequences, in
// order: on_valid(begin, end) for each non-empty well-formed run,
// on_invalid(begin, end) for each ill-formed sequence (as utf8_step sizes it).
template <typename OnValid, typename OnInvalid>
void for_each_utf8_run(std::string_view text, OnValid&& on_valid, OnInvalid&& on_invalid) {
  size_t run_begin = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Step s = utf8_step(text.substr(i));
    if (s.status == Utf8Status::kValid) {
      i += s.length;
      continue;
    }
    if (i > run_begin) on_valid(run_begin, i);
    on_invalid(i, i + s.length);
    i += s.length;
    run_begin = i;
  }
  if (text.size() > run_begin) on_valid(run_begin, text.size());
}

// The UTF-8 encoding of code point `cp` (which must be a scalar value).
std::string utf8_encode(uint32_t cp);

// "\xEF\xBF\xBD", U+FFFD REPLACEMENT CHARACTER.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

}  // namespace nnsight
