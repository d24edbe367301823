// HttpServer on loopback with a handler written here: what reaches the
// handler, and what a misbehaving client gets (oversized bodies refused before
// they are read, refused keys, too many connections, silent and slow clients,
// malformed framing, half-closed clients, a stop while handlers run).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/http_server.h"
#include "support/loopback.h"

namespace nnsight {
namespace {

using server::HttpRequest;
using server::HttpResponder;
using server::HttpResponse;
using server::HttpServer;
using server::HttpServerOptions;

int connect_to(int port) { return testing::connect_loopback(port); }

std::string exchange(int port, const std::string& text, bool half_close = false) {
  return testing::exchange_loopback(port, text, half_close);
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
              if (r.path == "/slow") {  // works a while, as a completion does, unless the client leaves
                for (int i = 0; i < 30; ++i) {
                  if (out.client_gone()) return;
                  std::this_thread::sleep_for(std::chrono::milliseconds(10));
                }
                HttpResponse res;
                res.body = "{\"slow\":\"done\"}";
                out.send(res);
                return;
              }
              if (r.path == "/hurry") {  // runs until the server stops, then answers with an error
                while (!out.server_stopping()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                out.send(server::json_error(503, "the server is shutting down"));
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
  o.shutdown_grace_s = 0.5;
  return o;
}

// The status of the last response in `out` (after any interim 1xx).
std::string final_status(const std::string& out) {
  size_t at = 0, last = std::string::npos;
  while ((at = out.find("HTTP/1.1 ", at)) != std::string::npos) last = at++;
  return last == std::string::npos ? "" : out.substr(last + 9, 3);
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

TEST(HttpServer, AnswersHeadWithHeadersOnly) {
  Fixture f(options());
  // A body after HEAD's answer would be read as the next answer's start.
  const std::string out =
      exchange(f.server.port(),
               "HEAD /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n"
               "GET /b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  const size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 13\r\n"), std::string::npos) << out;  // what GET /a would carry
  EXPECT_EQ(out.compare(head_end + 4, 12, "HTTP/1.1 200"), 0) << out;
  EXPECT_EQ(out.find("{\"path\":\"/a\"}"), std::string::npos) << out;
  EXPECT_NE(out.find("{\"path\":\"/b\"}"), std::string::npos) << out;
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
  HttpServerOptions o = options();
  o.head_timeout_s = 0.5;
  Fixture f(o);
  // Four connections whose handlers run hold every slot: none can be pushed
  // out, so a fifth connection is over the cap.
  std::vector<int> busy;
  const std::string wait = "GET /wait HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n";
  for (int i = 0; i < 4; ++i) {
    busy.push_back(connect_to(f.server.port()));
    ::send(busy.back(), wait.data(), wait.size(), MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string out = exchange(f.server.port(), "GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  for (int fd : busy) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // their handlers see them leave
  // Silent connections are closed after the head timeout, and the server serves again.
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(connect_to(f.server.port()));
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

TEST(HttpServer, SlowHeadsAreCutSoonerThanBodiesWith408) {
  HttpServerOptions o = options();
  o.head_timeout_s = 0.3;
  o.read_timeout_s = 1.5;
  Fixture f(o);
  // One byte of a head, then silence: cut at the head's deadline, told why.
  auto t0 = std::chrono::steady_clock::now();
  std::string out = exchange(f.server.port(), "G");
  const double head_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(final_status(out), "408") << out;
  EXPECT_NE(out.find("head did not arrive"), std::string::npos) << out;
  EXPECT_LT(head_s, 1.2);
  // A whole head and part of its body: the body has the longer deadline.
  t0 = std::chrono::steady_clock::now();
  out = exchange(f.server.port(),
                 "POST /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nContent-Length: 10\r\n\r\nab");
  const double body_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(final_status(out), "408") << out;
  EXPECT_NE(out.find("body did not arrive"), std::string::npos) << out;
  EXPECT_GT(body_s, 1.2);
  EXPECT_EQ(f.handled.load(), 0);
}

TEST(HttpServer, KeylessSlowSocketsCannotTakeEverySlot) {
  HttpServerOptions o = options();
  o.head_timeout_s = 30;  // the slow sockets are not cut by time in this test
  o.max_connections_per_address = 100;
  Fixture f(o);
  // Every slot held by a socket that sent one byte of a head.
  std::vector<int> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(connect_to(f.server.port()));
    ::send(slow.back(), "G", 1, MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // A client with a key is served: the longest waiting head made room.
  for (int i = 0; i < 3; ++i) {
    std::string out = exchange(f.server.port(),
                               "GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  }
  // The pushed-out ones were told (503) and closed. Which ones: the longest
  // waiting heads as the server saw them, which on a loaded machine need not
  // be the connect order, so every slow socket is read (the others time out).
  int told = 0;
  for (int fd : slow) {
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string got;
    char buf[1024];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
    if (!got.empty()) {
      EXPECT_EQ(final_status(got), "503") << got;
      ++told;
    }
  }
  EXPECT_GE(told, 1);
  for (int fd : slow) ::close(fd);
}

TEST(HttpServer, ConnectionsPerAddressAreCapped) {
  HttpServerOptions o = options();
  o.max_connections_per_address = 2;
  o.head_timeout_s = 30;
  Fixture f(o);
  std::vector<int> held{connect_to(f.server.port()), connect_to(f.server.port())};
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::string out = exchange(f.server.port(), "GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n");
  EXPECT_EQ(final_status(out), "503") << out;
  EXPECT_NE(out.find("this address"), std::string::npos) << out;
  for (int fd : held) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  out =
      exchange(f.server.port(), "GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(final_status(out), "200") << out;
}

TEST(HttpServer, HalfClosedClientsAreAnswered) {
  Fixture f(options());
  // The client sends its request and shuts its sending side: it still reads.
  for (int i = 0; i < 5; ++i) {
    std::string out =
        exchange(f.server.port(), "GET /slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n", true);
    EXPECT_EQ(final_status(out), "200") << out;
    EXPECT_NE(out.find("{\"slow\":\"done\"}"), std::string::npos) << out;
  }
  EXPECT_EQ(f.handled.load(), 5);
}

TEST(HttpServer, FramingErrorsAreAnswered400BeforeClosing) {
  Fixture f(options());
  const std::string key = "Host: x\r\nAuthorization: Bearer ok\r\n";
  // A transfer coding other than chunked, even beside Content-Length (RFC 9112 6.3).
  std::string out = exchange(
      f.server.port(), "POST /a HTTP/1.1\r\n" + key + "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(final_status(out), "400") << out;
  EXPECT_NE(out.find("chunked"), std::string::npos) << out;
  out = exchange(f.server.port(),
                 "POST /a HTTP/1.1\r\n" + key + "Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(final_status(out), "501") << out;
  // Malformed heads and chunks.
  out = exchange(f.server.port(), "GET /a HTTP/1.1\r\nHost x\r\n\r\n");
  EXPECT_EQ(final_status(out), "400") << out;
  out = exchange(f.server.port(), "POST /a HTTP/1.1\r\n" + key + "Content-Length: abc\r\n\r\n");
  EXPECT_EQ(final_status(out), "400") << out;
  out = exchange(f.server.port(),
                 "POST /a HTTP/1.1\r\n" + key + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(final_status(out), "400") << out;
  // A request cut off in its body.
  out = exchange(f.server.port(), "POST /a HTTP/1.1\r\n" + key + "Content-Length: 10\r\n\r\nabc", true);
  EXPECT_EQ(final_status(out), "400") << out;
  // Two Authorization headers: which one counts would be a guess.
  out = exchange(f.server.port(),
                 "GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer no\r\nAuthorization: Bearer ok\r\n\r\n");
  EXPECT_EQ(final_status(out), "400") << out;
  EXPECT_NE(out.find("authorization"), std::string::npos) << out;
  // A method no one implements.
  out = exchange(f.server.port(), "BREW /a HTTP/1.1\r\n" + key + "\r\n");
  EXPECT_EQ(final_status(out), "501") << out;
  EXPECT_EQ(f.handled.load(), 0);
  // Every answer is the JSON error shape.
  EXPECT_NE(out.find("{\"error\":{\"code\":501,\"message\":"), std::string::npos) << out;
}

TEST(HttpServer, StopLetsRunningHandlersAnswer) {
  auto f = std::make_unique<Fixture>(options());
  int fd = connect_to(f->server.port());
  const std::string req = "GET /hurry HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread stopper([&] { f.reset(); });
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  stopper.join();
  ::close(fd);
  EXPECT_EQ(final_status(out), "503") << out;
  EXPECT_NE(out.find("shutting down"), std::string::npos) << out;
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
