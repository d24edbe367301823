// ApiKeys: who may use the server. A keys file holds one tenant a line,
//   alice:sk-plain-key-text
//   bob:sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
// (the second form keeps only the key's SHA-256 at rest; `#` starts a comment).
// Clients send "Authorization: Bearer <key>"; keys are compared by their
// SHA-256 digests in constant time.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nnsight::server {

class ApiKeys {
 public:
  // No keys: every request is the tenant "anonymous" (a server for one user).
  ApiKeys() = default;
  // Throws nnsight::ConfigError naming the file and line for a malformed entry
  // or a repeated tenant name.
  static ApiKeys load(const std::string& path);

  bool enabled() const { return !entries_.empty(); }
  // The tenant of an Authorization header value, or nullopt for a missing or
  // unknown key.
  std::optional<std::string> tenant(const std::string& authorization) const;

  static std::string sha256_hex(const std::string& text);

 private:
  struct Entry {
    std::string tenant;
    std::string digest;  // 32 raw bytes
  };
  std::vector<Entry> entries_;
};

}  // namespace nnsight::server
