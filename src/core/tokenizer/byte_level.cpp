#include "core/tokenizer/byte_level.h"

#include <array>

#include "core/tokenizer/utf8.h"

namespace nnsight {
namespace {

struct ByteLevelTables {
  std::array<uint32_t, 256> code_point{};
  std::array<int16_t, 0x144> byte{};  // indexed by code point; -1 = not in the alphabet
  std::array<std::string, 256> utf8;  // UTF-8 of code_point[b]

  ByteLevelTables() {
    byte.fill(-1);
    uint32_t next_extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      code_point[b] = printable ? b : next_extra++;
      byte[code_point[b]] = static_cast<int16_t>(b);
      utf8[b] = utf8_encode(code_point[b]);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

uint32_t byte_level_code_point(uint8_t b) { return tables().code_point[b]; }

int byte_level_byte(uint32_t cp) { return cp < tables().byte.size() ? tables().byte[cp] : -1; }

std::string byte_level_encode(std::string_view bytes) {
  const ByteLevelTables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.utf8[static_cast<uint8_t>(c)];
  return out;
}

bool byte_level_decode(std::string_view text, std::string* out) {
  const ByteLevelTables& t = tables();
  out->clear();
  out->reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto* p = reinterpret_cast<const uint8_t*>(text.data() + i);
    uint32_t cp;
    if (p[0] < 0x80) {
      cp = p[0];
      i += 1;
    } else {
      // Every alphabet code point is below U+0800, so two-byte sequences suffice.
      const Utf8Step s = utf8_step(text.substr(i));
      if (s.status != Utf8Status::kValid || s.length != 2) return false;
      cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
      i += 2;
    }
    if (cp >= t.byte.size() || t.byte[cp] < 0) return false;
    out->push_back(static_cast<char>(t.byte[cp]));
  }
  return true;
}

}  // namespace nnsight
