// Base64 (RFC 4648, standard alphabet, '=' padding) for tensor bytes in JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nnsight::dsl {

std::string base64_encode(const uint8_t* data, size_t n);
// Bytes the text decodes to, or nullopt when its length or padding is not
// valid base64 (cheap: lets callers check the size before allocating).
std::optional<size_t> base64_decoded_size(std::string_view text);
// Decodes into out[0 .. base64_decoded_size(text)); false on a bad character.
bool base64_decode(std::string_view text, uint8_t* out);

}  // namespace nnsight::dsl
