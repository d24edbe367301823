// libFuzzer target over `nnsight serve`: request framing, routing and the
// JSON bodies of every endpoint, on the real server (ModelServer, in this
// process, on a free loopback port) serving the tiny SentencePiece model of
// tests/data/models/mistral_spm (2 layers, 320 tokens, 128 positions: a
// generation is a few milliseconds and always ends).
//
// An input is sent on a fresh connection, which then half-closes; the server
// must answer and close. Two forms, by the low bit of the first byte:
//   even: the rest is sent as it is (the fuzzer explores framing and headers);
//   odd:  byte 1 picks an endpoint (kEndpoints), the rest is its body, sent
//         in a well-formed request with the API key (bit 1 of byte 0 drops
//         the key, bit 2 adds ?wait=1). For endpoints with a trace id, the
//         body's first line is the id ("@" = the last id the server gave).
//         The last endpoint is a trace recorded by a C++ client with its
//         binary payloads as raw bytes (server/fuzz/invokes_input.h), so that
//         they are mutated as bytes, not as base64 the server refuses. Seeds:
//         tests/data/server/fuzz_corpus/payload_* (tests/server/fuzz_seeds_test.cpp).
// A finding is a sanitizer report, a crash, a server that does not answer
// within 20 s, a 500 (a client cannot cause a server error: 4xx is what the
// client did, 5xx what the server did, and nothing here fails the server), an
// error answer that is not the documented JSON shape, or a status line that
// is not HTTP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "server/fuzz/invokes_input.h"
#include "server/model_server.h"

namespace {

using nlohmann::json;

const char* kKey = "sk-fuzz-0123456789abcdef";

struct Endpoint {
  const char* method;
  const char* path;       // "{}" is replaced by a trace id
  bool payloads = false;  // the body is invokes with raw payload bytes (above)
};
const Endpoint kEndpoints[] = {
    {"GET", "/health"},
    {"GET", "/v1/models"},
    {"GET", "/v1/models/tiny/structure"},
    {"POST", "/v1/tokenize"},
    {"POST", "/v1/detokenize"},
    {"POST", "/v1/completions"},
    {"POST", "/v1/chat/completions"},
    {"POST", "/v1/traces"},
    {"GET", "/v1/traces"},
    {"GET", "/v1/traces/{}"},
    {"GET", "/v1/traces/{}/saves"},
    {"DELETE", "/v1/traces/{}"},
    {"GET", "/v1/models/{}/structure"},
    {"POST", "/v1/traces", true},
};
constexpr size_t kNumEndpoints = sizeof(kEndpoints) / sizeof(kEndpoints[0]);

[[noreturn]] void finding(const std::string& what, std::string_view request, const std::string& response) {
  std::fprintf(stderr, "http_fuzzer: %s\n--- request (%zu bytes) ---\n%.*s\n--- response ---\n%s\n", what.c_str(),
               request.size(), static_cast<int>(std::min<size_t>(request.size(), 4000)), request.data(),
               response.substr(0, 4000).c_str());
  std::abort();
}

struct Server {
  std::unique_ptr<nnsight::server::ModelServer> srv;
  int port = 0;
  std::string last_trace_id = "none";

  Server() {
    // The server's own log lines (warnings for refused requests) would drown
    // libFuzzer's; a finding aborts with its own message.
    nnsight::set_log_sink([](nnsight::LogLevel, const std::string&) {});
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("nnsight-http-fuzz-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/keys") << "fuzz:" << kKey << "\n";
    nnsight::server::ServeOptions o;
    o.engine = nnsight::EngineArgs()
                   .model(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/models/mistral_spm")
                   .kv_cache_memory_mb(4)
                   .show_progress(false);
    o.served_model_name = "tiny";
    o.port = 0;
    o.api_keys_file = dir + "/keys";
    o.max_body_bytes = 1 << 20;
    o.head_timeout_s = 5;
    o.read_timeout_s = 5;
    o.retention_s = 2;  // saves nobody fetches do not pile up over a long run
    o.max_retained_bytes = 64 << 20;
    o.limits.max_trace_seconds = 10;
    srv = std::make_unique<nnsight::server::ModelServer>(o);
    port = srv->port();
    std::filesystem::remove_all(dir);
  }
};

Server& server() {
  static Server* s = new Server();  // never destroyed: libFuzzer exits without unwinding
  return *s;
}

// Sends `request`, half-closes, and reads until the server closes.
std::string round_trip(int port, std::string_view request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's timer (SIGALRM) interrupts system calls: EINTR is retried,
  // and an interrupted connect goes on in the background.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int err = errno;
    if (err == EINTR) {
      pollfd p{fd, POLLOUT, 0};
      while (::poll(&p, 1, 20000) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) finding(std::string("cannot connect: ") + std::strerror(err), request, "");
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server refused early (413, 431) and closed: fine
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  char buf[65536];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) finding("no answer within 20 s", request, response);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return response;
}

// Checks every response in `all` (a keep-alive connection may carry several).
void check(std::string_view request, const std::string& all) {
  size_t at = 0;
  while (at < all.size()) {
    const size_t head_end = all.find("\r\n\r\n", at);
    // HTTP/1.0 for a 1.0 request, else 1.1.
    if ((all.compare(at, 9, "HTTP/1.1 ") != 0 && all.compare(at, 9, "HTTP/1.0 ") != 0) || head_end == std::string::npos)
      finding("not an HTTP/1.x response", request, all.substr(at));
    const int status = std::atoi(all.c_str() + at + 9);
    if (status < 100 || status > 599) finding("bad status", request, all.substr(at));
    const std::string head = all.substr(at, head_end - at);
    at = head_end + 4;
    if (status < 200) continue;  // an interim 100 Continue
    if (status == 500) finding("a server error for a client's request", request, all);
    const size_t cl = head.find("\r\nContent-Length: ");
    if (cl == std::string::npos) return;  // a stream: its body runs to the close
    // The answer to a HEAD has no body (its Content-Length is GET's).
    if (request.find("HEAD ") != std::string_view::npos && (at == all.size() || all.compare(at, 7, "HTTP/1.") == 0))
      continue;
    const size_t length = std::strtoul(head.c_str() + cl + 18, nullptr, 10);
    if (at + length > all.size()) finding("a body shorter than its Content-Length", request, all);
    const std::string body = all.substr(at, length);
    at += length;
    if (head.find("\r\nContent-Type: application/json") == std::string::npos) continue;
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) finding("a JSON answer that is not JSON", request, all);
    if (status >= 400) {
      const bool shaped = j.is_object() && j.contains("error") && j["error"].is_object() &&
                          j["error"].contains("message") && j["error"]["message"].is_string() &&
                          j["error"].contains("type") && j["error"]["type"].is_string() &&
                          j["error"].contains("code") && j["error"]["code"] == status;
      if (!shaped) finding("an error answer without the documented shape", request, all);
    } else if (status == 202 && j.contains("id") && j["id"].is_string()) {
      server().last_trace_id = j["id"].get<std::string>();
    }
  }
}

std::string escape_path(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (c > 0x20 && c < 0x7f && c != '%' && c != '?' && c != '#') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string structured(const uint8_t* data, size_t size) {
  const uint8_t flags = data[0];
  const Endpoint& e = kEndpoints[(size > 1 ? data[1] : 0) % kNumEndpoints];
  std::string_view body(reinterpret_cast<const char*>(data) + std::min<size_t>(size, 2),
                        size - std::min<size_t>(size, 2));
  std::string path = e.path;
  const size_t hole = path.find("{}");
  if (hole != std::string::npos) {
    const size_t nl = body.find('\n');
    std::string_view id = body.substr(0, nl);
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    path.replace(hole, 2, id == "@" ? server().last_trace_id : escape_path(id));
  }
  std::string payloads_body;
  if (e.payloads) {
    payloads_body = nnsight::server::fuzz::invokes_body(body);
    body = payloads_body;
  }
  if (flags & 4) path += "?wait=1";
  std::string r = std::string(e.method) + " " + path + " HTTP/1.1\r\nHost: fuzz\r\n";
  if (!(flags & 2)) r += std::string("Authorization: Bearer ") + kKey + "\r\n";
  if (!body.empty() || std::string_view(e.method) == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "\r\n";
  r.append(body);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Server& s = server();
  const std::string request =
      (data[0] & 1) ? structured(data, size) : std::string(reinterpret_cast<const char*>(data) + 1, size - 1);
  check(request, round_trip(s.port, request));
  return 0;
}
