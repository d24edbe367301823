// Base64 (RFC 4648, standard alphabet, '=' padding): tensor bytes in JSON
// graphs, binary trace payloads in JSON bodies. OpenSSL's EVP block coders do
// the work; decoding also insists on the canonical form (padding only at the
// end, zero bits under it), so one text means one byte string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nnsight::dsl {

std::string base64_encode(const uint8_t* data, size_t n);
inline std::string base64_encode(std::string_view bytes) {
  return base64_encode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}
// Bytes the text decodes to, or nullopt when its length or padding is not
// valid base64 (cheap: lets callers check the size before allocating).
std::optional<size_t> base64_decoded_size(std::string_view text);
// Decodes into out[0 .. base64_decoded_size(text)); false when the text is not
// canonical base64.
bool base64_decode(std::string_view text, uint8_t* out);
// The bytes; throws nnsight::ConfigError naming `what` for text that is not base64.
std::string base64_decode(std::string_view text, const std::string& what);

}  // namespace nnsight::dsl
