// Unguessable ids for what the server hands out (trace ids, completion ids),
// and lower-case hex, which both they and key digests are written in.
#pragma once

#include <string>

namespace nnsight::server {

std::string to_hex(const std::string& bytes);
// `prefix` + 24 hex digits from OpenSSL's RAND_bytes (96 bits). Throws
// nnsight::Error when no random bytes can be had.
std::string random_id(const std::string& prefix);

}  // namespace nnsight::server
