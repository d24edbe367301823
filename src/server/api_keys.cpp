#include "server/api_keys.h"

#include <absl/strings/ascii.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cctype>
#include <fstream>
#include <set>

#include <nnsight/error.hpp>

#include "server/random_id.h"

namespace nnsight::server {
namespace {

std::string sha256(const std::string& text) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d);
  return std::string(reinterpret_cast<const char*>(d), sizeof d);
}

}  // namespace

std::string ApiKeys::sha256_hex(const std::string& text) { return to_hex(sha256(text)); }

ApiKeys ApiKeys::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("--api-keys: cannot read '" + path + "'");
  ApiKeys keys;
  std::set<std::string> names;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    absl::StripAsciiWhitespace(&line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(n);
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == line.size())
      throw ConfigError(where + ": expected 'tenant:key' or 'tenant:sha256:<64 hex digits>'");
    Entry e;
    e.tenant = std::string(absl::StripAsciiWhitespace(absl::string_view(line).substr(0, colon)));
    const std::string rest(absl::StripAsciiWhitespace(absl::string_view(line).substr(colon + 1)));
    if (rest.rfind("sha256:", 0) == 0) {
      const std::string hex = rest.substr(7);
      if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        throw ConfigError(where + ": a sha256: entry needs 64 hex digits");
      for (size_t i = 0; i < 64; i += 2) e.digest += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    } else {
      if (rest.size() < 16) throw ConfigError(where + ": the key of '" + e.tenant + "' is shorter than 16 characters");
      e.digest = sha256(rest);
    }
    if (!names.insert(e.tenant).second) throw ConfigError(where + ": tenant '" + e.tenant + "' appears twice");
    keys.entries_.push_back(std::move(e));
  }
  if (keys.entries_.empty()) throw ConfigError("--api-keys: '" + path + "' holds no key");
  return keys;
}

std::optional<std::string> ApiKeys::tenant(const std::string& authorization) const {
  if (!enabled()) return std::string("anonymous");
  // The scheme is case-insensitive (RFC 9110 11.1): "Bearer", "bearer", "BEARER".
  const std::string scheme = "bearer";
  if (authorization.size() <= scheme.size() + 1 ||
      (authorization[scheme.size()] != ' ' && authorization[scheme.size()] != '\t'))
    return std::nullopt;
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return std::nullopt;
  const std::string digest =
      sha256(std::string(absl::StripAsciiWhitespace(absl::string_view(authorization).substr(scheme.size() + 1))));
  std::optional<std::string> found;
  for (const auto& e : entries_)  // every entry is compared: the time does not tell which matched
    if (CRYPTO_memcmp(e.digest.data(), digest.data(), digest.size()) == 0) found = e.tenant;
  return found;
}

}  // namespace nnsight::server
