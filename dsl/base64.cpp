#include "dsl/base64.h"

#include <openssl/evp.h>

#include <nnsight/error.hpp>

namespace nnsight::dsl {

std::string base64_encode(const uint8_t* data, size_t n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');  // EVP_EncodeBlock writes a terminating NUL
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<size_t>(written));
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
  if (text.empty()) return true;
  // '=' only as the padding at the end (EVP_DecodeBlock reads it as zero bits anywhere).
  const size_t pad = text.size() / 4 * 3 - *size;
  if (text.find('=') < text.size() - pad) return false;
  // EVP_DecodeBlock writes whole groups (the padding's bytes too) and skips
  // leading whitespace; decode into a buffer of the whole groups' size.
  std::string buf(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(buf.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0 || static_cast<size_t>(n) != buf.size()) return false;
  // Canonical: the bits under the padding are zero, i.e. the last group encodes back to itself.
  const size_t tail = *size % 3 == 0 ? 3 : *size % 3;
  if (base64_encode(reinterpret_cast<const uint8_t*>(buf.data()) + *size - tail, tail) != text.substr(text.size() - 4))
    return false;
  std::copy(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*size), out);
  return true;
}

std::string base64_decode(std::string_view text, const std::string& what) {
  auto size = base64_decoded_size(text);
  if (!size) throw ConfigError(what + ": not base64 (its length is not a multiple of 4, or its padding is wrong)");
  std::string out(*size, '\0');
  if (!base64_decode(text, reinterpret_cast<uint8_t*>(out.data()))) throw ConfigError(what + ": not base64");
  return out;
}

}  // namespace nnsight::dsl
