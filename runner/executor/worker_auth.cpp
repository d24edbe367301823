#include "runner/executor/worker_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nnsight/error.hpp>

namespace nnsight::runner {
namespace {

constexpr char kMagic[] = "NNSIGHT-AUTH1";
constexpr size_t kMagicLen = sizeof(kMagic) - 1;
constexpr size_t kNonceLen = 32, kMacLen = 32;

// Reads exactly n bytes within timeout_s; false on EOF, error or timeout.
bool read_exact(int fd, unsigned char* p, size_t n, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  size_t got = 0;
  while (got < n) {
    const double left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return false;
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const unsigned char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void mac(const std::string& secret, const unsigned char* nonce, unsigned char* out) {
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), nonce, kNonceLen, out, &len);
}

}  // namespace

std::string load_worker_secret(const std::string& file) {
  if (file.empty()) {
    const char* env = std::getenv("NNSIGHT_WORKER_SECRET");
    return env ? env : "";
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError("worker secret file '" + file + "' cannot be read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty()) throw ConfigError("worker secret file '" + file + "' is empty");
  return s;
}

bool challenge_peer(int fd, const std::string& secret, double timeout_s) {
  unsigned char hello[kMagicLen + kNonceLen];
  std::memcpy(hello, kMagic, kMagicLen);
  if (RAND_bytes(hello + kMagicLen, static_cast<int>(kNonceLen)) != 1) return false;
  if (!write_all(fd, hello, sizeof hello)) return false;
  unsigned char answer[kMacLen], want[kMacLen];
  if (!read_exact(fd, answer, kMacLen, timeout_s)) return false;
  mac(secret, hello + kMagicLen, want);
  if (CRYPTO_memcmp(answer, want, kMacLen) != 0) return false;
  const unsigned char ok = 'Y';
  return write_all(fd, &ok, 1);
}

void answer_challenge(int fd, const std::string& secret, double timeout_s, const std::string& who) {
  unsigned char hello[kMagicLen + kNonceLen];
  if (!read_exact(fd, hello, sizeof hello, timeout_s) || std::memcmp(hello, kMagic, kMagicLen) != 0)
    throw Error(who +
                " sent no authentication challenge: start it with the same worker secret "
                "(--secret-file or NNSIGHT_WORKER_SECRET)");
  unsigned char answer[kMacLen];
  mac(secret, hello + kMagicLen, answer);
  unsigned char ok = 0;
  if (!write_all(fd, answer, kMacLen) || !read_exact(fd, &ok, 1, timeout_s) || ok != 'Y')
    throw Error(who + " refused the authentication: the engine's worker secret is not the worker's");
}

}  // namespace nnsight::runner
