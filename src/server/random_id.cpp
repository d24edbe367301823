#include "server/random_id.h"

#include <openssl/rand.h>

#include <nnsight/error.hpp>

namespace nnsight::server {

std::string to_hex(const std::string& bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string random_id(const std::string& prefix) {
  unsigned char b[12];
  if (RAND_bytes(b, sizeof b) != 1) throw Error("serve: no random bytes for an id");
  return prefix + to_hex(std::string(reinterpret_cast<const char*>(b), sizeof b));
}

}  // namespace nnsight::server
