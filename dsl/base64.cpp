#include "dsl/base64.h"

#include <array>

namespace nnsight::dsl {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_table() {
  std::array<int8_t, 256> t{};
  for (auto& x : t) x = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr std::array<int8_t, 256> kTable = make_table();

}  // namespace

std::string base64_encode(const uint8_t* data, size_t n) {
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  if (n - i == 1) {
    uint32_t v = uint32_t{data[i]} << 16;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out += "==";
  } else if (n - i == 2) {
    uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8);
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back('=');
  }
  return out;
}

std::optional<size_t> base64_decoded_size(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  if (text.empty()) return 0;
  size_t pad = 0;
  if (text[text.size() - 1] == '=') ++pad;
  if (text[text.size() - 2] == '=') ++pad;
  if (pad == 1 && text[text.size() - 2] == '=') return std::nullopt;
  return text.size() / 4 * 3 - pad;
}

bool base64_decode(std::string_view text, uint8_t* out) {
  auto size = base64_decoded_size(text);
  if (!size) return false;
  size_t o = 0;
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int v[4];
    int used = 4;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        // Padding only at the end, and nothing after it but padding.
        if (k == 2 && text[i + 3] != '=') return false;
        used = k;
        break;
      }
      v[k] = kTable[static_cast<uint8_t>(c)];
      if (v[k] < 0) return false;
    }
    for (int k = used; k < 4; ++k) v[k] = 0;
    uint32_t bits = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    // Canonical encoding: the unused low bits of a padded group are zero.
    if (used == 2 && (bits & 0xffff)) return false;
    if (used == 3 && (bits & 0xff)) return false;
    out[o++] = static_cast<uint8_t>(bits >> 16);
    if (used >= 3) out[o++] = static_cast<uint8_t>(bits >> 8);
    if (used == 4) out[o++] = static_cast<uint8_t>(bits);
  }
  return o == *size;
}

}  // namespace nnsight::dsl
