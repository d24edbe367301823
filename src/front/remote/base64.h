// Base64 (RFC 4648, with padding) for binary trace payloads inside JSON
// bodies; OpenSSL's EVP block coders do the work.
#pragma once

#include <string>
#include <string_view>

namespace nnsight::remote {

std::string base64_encode(std::string_view bytes);
// Throws nnsight::ConfigError naming `what` for text that is not base64.
std::string base64_decode(std::string_view text, const std::string& what);

}  // namespace nnsight::remote
