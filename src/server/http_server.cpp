#include "server/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <list>

#include <nnsight/error.hpp>

#include "core/log.h"

namespace nnsight::server {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string HttpRequest::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpResponse json_error(int status, const std::string& message, const std::string& type) {
  HttpResponse r;
  r.status = status;
  std::string t = type;
  if (t.empty()) {
    t = status == 401   ? "authentication_error"
        : status == 404 ? "not_found_error"
        : status == 413 ? "request_too_large"
        : status == 429 ? "rate_limit_error"
        : status >= 500 ? "server_error"
                        : "invalid_request_error";
  }
  nlohmann::json j = {{"error", {{"message", message}, {"type", t}, {"code", status}}}};
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Connection {
  explicit Connection(tcp::socket s) : socket(std::move(s)) {}
  tcp::socket socket;
  // When the connection started waiting for (part of) a request; -1 while a
  // handler runs (handlers may wait long for a trace).
  std::atomic<int64_t> reading_since{-1};
};

class Responder final : public HttpResponder {
 public:
  Responder(Connection& c, bool keep_alive, unsigned version) : c_(c), keep_alive_(keep_alive), version_(version) {}

  void send(HttpResponse r) override {
    if (sent_) return;
    sent_ = true;
    http::response<http::string_body> res{static_cast<http::status>(r.status), version_};
    res.set(http::field::server, "nnsight");
    res.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res.set(k, v);
    res.keep_alive(keep_alive_);
    res.body() = std::move(r.body);
    res.prepare_payload();
    beast::error_code ec;
    http::write(c_.socket, res, ec);
    if (ec) keep_alive_ = false;
  }

  bool start_stream(int status, const std::string& content_type) override {
    if (sent_) return false;
    sent_ = true;
    streamed_ = true;
    keep_alive_ = false;
    std::string reason(http::obsolete_reason(static_cast<http::status>(status)));
    return write("HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nServer: nnsight\r\nContent-Type: " +
                 content_type + "\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n");
  }

  bool write(const std::string& data) override {
    if (failed_) return false;
    beast::error_code ec;
    asio::write(c_.socket, asio::buffer(data), ec);  // MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE
    if (ec) failed_ = true;
    return !failed_;
  }

  bool client_gone() override {
    if (failed_) return true;
    pollfd p{c_.socket.native_handle(), POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char byte;
    return ::recv(p.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

  bool sent() const { return sent_; }
  bool keep_alive() const { return keep_alive_ && !streamed_ && !failed_; }

 private:
  Connection& c_;
  bool keep_alive_;
  unsigned version_;
  bool sent_ = false;
  bool streamed_ = false;
  bool failed_ = false;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  Precheck precheck;
  Handler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::thread accept_thread;
  std::thread reaper_thread;
  std::mutex mu;
  std::condition_variable cv;
  std::list<std::shared_ptr<Connection>> connections;
  bool stopping = false;

  void accept_loop() {
    for (;;) {
      tcp::socket socket(ioc);
      beast::error_code ec;
      acceptor.accept(socket, ec);
      std::unique_lock<std::mutex> lock(mu);
      if (stopping) return;
      if (ec) continue;
      if (connections.size() >= options.max_connections) {
        lock.unlock();
        refuse(std::move(socket));
        continue;
      }
      auto conn = std::make_shared<Connection>(std::move(socket));
      conn->reading_since = now_ms();
      connections.push_back(conn);
      std::thread([this, conn] {
        serve(*conn);
        std::lock_guard<std::mutex> g(mu);
        connections.remove(conn);
        cv.notify_all();
      }).detach();
    }
  }

  void refuse(tcp::socket socket) {
    http::response<http::string_body> res{http::status::service_unavailable, 11};
    res.set(http::field::content_type, "application/json");
    res.body() = json_error(503, "the server has too many open connections (" +
                                     std::to_string(options.max_connections) + "); try again")
                     .body;
    res.keep_alive(false);
    res.prepare_payload();
    beast::error_code ec;
    http::write(socket, res, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  void reaper_loop() {
    std::unique_lock<std::mutex> lock(mu);
    const int64_t limit = static_cast<int64_t>(options.read_timeout_s * 1000);
    while (!stopping) {
      cv.wait_for(lock, std::chrono::milliseconds(250));
      const int64_t now = now_ms();
      for (auto& c : connections) {
        const int64_t since = c->reading_since.load();
        if (since >= 0 && now - since > limit) {
          ::shutdown(c->socket.native_handle(), SHUT_RDWR);  // wakes the blocked read
          c->reading_since = -1;
        }
      }
    }
  }

  void serve(Connection& c) {
    beast::flat_buffer buffer;
    beast::error_code ec;
    for (;;) {
      c.reading_since = now_ms();
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
      parser.body_limit(options.max_body_bytes);
      http::read_header(c.socket, buffer, parser, ec);
      if (ec) {
        if (ec == http::error::header_limit) send_plain(c, json_error(431, "request headers too large"));
        // Beast checks Content-Length against the body limit with the headers.
        if (ec == http::error::body_limit)
          send_plain(
              c, json_error(413, "the request body has " +
                                     (parser.content_length() ? std::to_string(*parser.content_length()) : "too many") +
                                     " bytes; the limit is " + std::to_string(options.max_body_bytes)));
        break;
      }
      const auto& h = parser.get();
      HttpRequest req;
      req.method = std::string(h.method_string());
      const std::string target(h.target());
      const size_t q = target.find('?');
      req.path = target.substr(0, q);
      if (q != std::string::npos) {
        std::string rest = target.substr(q + 1);
        size_t start = 0;
        while (start <= rest.size()) {
          size_t amp = rest.find('&', start);
          if (amp == std::string::npos) amp = rest.size();
          std::string kv = rest.substr(start, amp - start);
          if (!kv.empty()) {
            size_t eq = kv.find('=');
            req.query[url_decode(kv.substr(0, eq))] = eq == std::string::npos ? "" : url_decode(kv.substr(eq + 1));
          }
          start = amp + 1;
        }
      }
      for (const auto& f : h) req.headers[lower(std::string(f.name_string()))] = std::string(f.value());
      const auto length = parser.content_length();
      if (length && *length > options.max_body_bytes) {
        send_plain(c, json_error(413, "the request body has " + std::to_string(*length) + " bytes; the limit is " +
                                          std::to_string(options.max_body_bytes)));
        break;
      }
      if (auto refusal = precheck(req)) {
        send_plain(c, *refusal);
        break;  // its body was not read: the connection cannot be reused
      }
      if (!parser.is_done()) http::read(c.socket, buffer, parser, ec);
      if (ec) {
        if (ec == http::error::body_limit)
          send_plain(c, json_error(413, "the request body exceeds the limit of " +
                                            std::to_string(options.max_body_bytes) + " bytes"));
        break;
      }
      c.reading_since = -1;
      req.body = std::move(parser.get().body());
      Responder r(c, parser.get().keep_alive(), parser.get().version());
      try {
        handler(req, r);
      } catch (const std::exception& e) {
        r.send(json_error(500, std::string("internal error: ") + e.what()));
      }
      if (!r.sent()) r.send(json_error(500, "the handler gave no response"));
      if (!r.keep_alive()) break;
    }
    c.socket.shutdown(tcp::socket::shutdown_both, ec);
    c.socket.close(ec);
  }

  void send_plain(Connection& c, const HttpResponse& r) { Responder(c, false, 11).send(r); }
};

HttpServer::HttpServer(HttpServerOptions options, Precheck precheck, Handler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->precheck = std::move(precheck);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  Impl& s = *impl_;
  beast::error_code ec;
  const auto address = asio::ip::make_address(s.options.host, ec);
  if (ec) throw Error("serve: '" + s.options.host + "' is not an IP address to listen on");
  tcp::endpoint ep(address, static_cast<unsigned short>(s.options.port));
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error("serve: cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) + ": " +
                ec.message());
  port_ = s.acceptor.local_endpoint().port();
  s.accept_thread = std::thread([&s] { s.accept_loop(); });
  s.reaper_thread = std::thread([&s] { s.reaper_loop(); });
}

void HttpServer::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.stopping) return;
    s.stopping = true;
    if (s.acceptor.is_open()) ::shutdown(s.acceptor.native_handle(), SHUT_RDWR);  // wakes accept()
    for (auto& c : s.connections) ::shutdown(c->socket.native_handle(), SHUT_RDWR);
    s.cv.notify_all();
  }
  if (s.accept_thread.joinable()) s.accept_thread.join();
  if (s.reaper_thread.joinable()) s.reaper_thread.join();
  std::unique_lock<std::mutex> lock(s.mu);
  // Handlers that wait on the engine see their client gone and return.
  s.cv.wait(lock, [&] { return s.connections.empty(); });
  beast::error_code ec;
  s.acceptor.close(ec);
}

}  // namespace nnsight::server
