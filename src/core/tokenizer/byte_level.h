// The GPT-2 byte-level alphabet: every byte 0..255 is stood for by one
// printable code point, so that vocabularies can be stored as text ("Ġthe" is
// " the"). Printable Latin-1 bytes stand for themselves; the other 68 bytes
// (controls, space, DEL, NBSP, soft hyphen) map, in byte order, onto U+0100..U+0143.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nnsight {

// The code point standing for byte `b`.
uint32_t byte_level_code_point(uint8_t b);

// The byte that code point `cp` stands for, or -1 when `cp` is outside the alphabet.
int byte_level_byte(uint32_t cp);

// Raw bytes -> their alphabet spelling (" the" -> "Ġthe").
std::string byte_level_encode(std::string_view bytes);

// Alphabet spelling -> raw bytes. Returns false (leaving *out unspecified) when
// `text` is not valid UTF-8 or contains a code point outside the alphabet.
bool byte_level_decode(std::string_view text, std::string* out);

}  // namespace nnsight
