// HttpServer on loopback with a handler written here: what reaches the
// handler, and what a misbehaving client gets (oversized bodies refused before
// they are read, refused keys, too many connections, silent clients).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/http_server.h"

namespace nnsight {
namespace {

using server::HttpRequest;
using server::HttpResponder;
using server::HttpResponse;
using server::HttpServer;
using server::HttpServerOptions;

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends `text` and reads until the server closes the connection.
std::string exchange(int port, const std::string& text) {
  int fd = connect_to(port);
  ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

struct Fixture {
  std::atomic<int> handled{0};
  std::atomic<bool> saw_gone{false};
  std::string last_body, last_query;
  HttpServer server;

  explicit Fixture(HttpServerOptions o)
      : server(
            o,
            [](const HttpRequest& r) -> std::optional<HttpResponse> {
              if (r.header("authorization") != "Bearer ok") return server::json_error(401, "no key");
              return std::nullopt;
            },
            [this](const HttpRequest& r, HttpResponder& out) {
              ++handled;
              last_body = r.body;
              if (r.query.count("wait")) last_query = r.query.at("wait") + "," + r.query.at("x");
              if (r.path == "/stream") {
                out.start_stream(200, "text/event-stream");
                out.write("data: 1\n\n");
                out.write("data: 2\n\n");
                return;
              }
              if (r.path == "/wait") {  // waits for the client to leave
                for (int i = 0; i < 200 && !out.client_gone(); ++i)
                  std::this_thread::sleep_for(std::chrono::milliseconds(10));
                saw_gone = out.client_gone();
                return;
              }
              HttpResponse res;
              res.body = "{\"path\":\"" + r.path + "\"}";
              out.send(res);
            }) {
    server.start();
  }
};

HttpServerOptions options() {
  HttpServerOptions o;
  o.port = 0;
  o.max_body_bytes = 1000;
  o.read_timeout_s = 0.5;
  o.max_connections = 4;
  return o;
}

TEST(HttpServer, AnswersAndKeepsTheConnection) {
  Fixture f(options());
  const std::string req =
      "POST /a?wait=1&x=%41 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nContent-Length: 5\r\n\r\nhello"
      "GET /b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nConnection: close\r\n\r\n";
  const std::string out = exchange(f.server.port(), req);
  EXPECT_NE(out.find("{\"path\":\"/a\"}"), std::string::npos) << out;
  EXPECT_NE(out.find("{\"path\":\"/b\"}"), std::string::npos) << out;
  EXPECT_EQ(f.handled.load(), 2);
  EXPECT_EQ(f.last_query, "1,A");
}

TEST(HttpServer, RefusesBeforeReadingTheBody) {
  Fixture f(options());
  // A body far over the limit, announced but never sent: the answer comes anyway.
  std::string out = exchange(
      f.server.port(), "POST /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nContent-Length: 100000000\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 413", 0), 0u) << out;
  EXPECT_NE(out.find("the limit is 1000"), std::string::npos);
  out = exchange(f.server.port(), "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 401", 0), 0u) << out;
  // Chunked bodies have no length: the parser's limit stops them.
  std::string chunk(2000, 'x');
  out =
      exchange(f.server.port(),
               "POST /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" +
                   chunk + "\r\n0\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 413", 0), 0u) << out;
  EXPECT_EQ(f.handled.load(), 0);
}

TEST(HttpServer, SilentClientsAreCutOffAndConnectionsAreCapped) {
  Fixture f(options());
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(connect_to(f.server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // A fifth connection is over the cap.
  std::string out = exchange(f.server.port(), "GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  // The silent ones are closed after the read timeout, and the server serves again.
  for (int fd : idle) {
    char c;
    EXPECT_LE(::recv(fd, &c, 1, 0), 0);
    ::close(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  out =
      exchange(f.server.port(), "GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
}

TEST(HttpServer, StreamsAndSeesClientsLeave) {
  Fixture f(options());
  std::string out = exchange(f.server.port(), "GET /stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n");
  EXPECT_NE(out.find("text/event-stream"), std::string::npos);
  EXPECT_NE(out.find("data: 1\n\ndata: 2\n\n"), std::string::npos) << out;
  int fd = connect_to(f.server.port());
  const std::string req = "GET /wait HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::close(fd);
  for (int i = 0; i < 100 && f.handled.load() == 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(f.saw_gone.load());
}

TEST(HttpServer, StopsWhileHandlersWait) {
  auto f = std::make_unique<Fixture>(options());
  int fd = connect_to(f->server.port());
  const std::string req = "GET /wait HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  f.reset();  // stop(): the waiting handler sees its client gone
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ::close(fd);
}

}  // namespace
}  // namespace nnsight
