#include "core/tokenizer/utf8.h"

namespace nnsight {

Utf8Step utf8_step(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {Utf8Status::kValid, 1};

  // Expected total length and the allowed range of the second byte; the
  // remaining continuation bytes are always 0x80..0xBF.
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 == 0xE0) {
    need = 3, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 3;
  } else if (b0 == 0xED) {
    need = 3, hi = 0x9F;  // excludes UTF-16 surrogates
  } else if (b0 == 0xF0) {
    need = 4, lo = 0x90;  // excludes overlong 4-byte forms
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 4;
  } else if (b0 == 0xF4) {
    need = 4, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Utf8Status::kInvalid, 1};  // stray continuation byte, C0/C1, F5..FF
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= n) return {Utf8Status::kIncomplete, i};
    const uint8_t lo_i = i == 1 ? lo : 0x80;
    const uint8_t hi_i = i == 1 ? hi : 0xBF;
    if (p[i] < lo_i || p[i] > hi_i) return {Utf8Status::kInvalid, i};
  }
  return {Utf8Status::kValid, need};
}

size_t utf8_valid_prefix(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<uint8_t>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Step s = utf8_step(bytes.substr(i));
    if (s.status != Utf8Status::kValid) break;
    i += s.length;
  }
  return i;
}

std::string utf8_encode(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

}  // namespace nnsight
