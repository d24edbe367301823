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
#include <optional>

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

enum Phase : int { kHead, kBody, kHandler };
// Why the server cut a connection's read short.
enum Cut : int { kNotCut, kTimedOut, kPushedOut, kStopping };

struct Connection {
  Connection(tcp::socket s, std::string a) : socket(std::move(s)), address(std::move(a)) {}
  tcp::socket socket;
  const std::string address;      // the client's IP address
  std::atomic<int> phase{kHead};  // what it waits for
  std::atomic<int64_t> since{0};  // when that phase began (ms)
  std::atomic<int> cut{kNotCut};  // set with a shutdown of its read side (the serve thread answers)

  void begin(Phase p) {
    since = now_ms();
    phase = p;
  }
};

bool iequals(const std::string& a, const char* b) { return lower(a) == lower(b); }

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

class Responder final : public HttpResponder {
 public:
  // `head`: the request was HEAD, whose answer has headers only (RFC 9110
  // 9.3.2) -- a body there would be read as the next answer's start.
  Responder(Connection& c, bool keep_alive, unsigned version, const std::atomic<bool>& stopping, bool head = false)
      : c_(c), keep_alive_(keep_alive), version_(version), stopping_(stopping), head_(head) {}

  void send(HttpResponse r) override {
    if (sent_) return;
    sent_ = true;
    if (stopping_) keep_alive_ = false;
    http::response<http::string_body> res{static_cast<http::status>(r.status), version_};
    res.set(http::field::server, "nnsight");
    res.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res.set(k, v);
    res.keep_alive(keep_alive_);
    res.body() = std::move(r.body);
    res.prepare_payload();
    beast::error_code ec;
    if (head_) {
      http::response_serializer<http::string_body> sr{res};
      http::write_header(c_.socket, sr, ec);
    } else {
      http::write(c_.socket, res, ec);
    }
    if (ec) keep_alive_ = false, failed_ = true;
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
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;  // reset, or both sides shut
    bool eof = (p.revents & POLLRDHUP) != 0;
    if (!eof && (p.revents & POLLIN)) {
      char byte;
      eof = ::recv(p.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    if (!eof) return false;
    // The client sent its FIN: it half-closed (and still reads), or it is
    // gone. Only a write tells them apart -- a gone client's kernel answers
    // it with a reset, seen by the next call. A stream's own writes do
    // that; before the answer, an interim "100 Continue" (which every
    // HTTP/1.1 client must accept and skip, RFC 9110 15.2) is the probe.
    if (!sent_ && !probed_ && version_ >= 11) {
      probed_ = true;
      write("HTTP/1.1 100 Continue\r\n\r\n");
    }
    return failed_;
  }

  bool server_stopping() override { return stopping_; }

  bool sent() const { return sent_; }
  bool keep_alive() const { return keep_alive_ && !streamed_ && !failed_ && !stopping_; }

 private:
  Connection& c_;
  bool keep_alive_;
  unsigned version_;
  const std::atomic<bool>& stopping_;
  bool head_;
  bool sent_ = false;
  bool streamed_ = false;
  bool failed_ = false;
  bool probed_ = false;
};

// What RFC 9112 requires of a request's framing that Beast lets through:
// one Authorization, Host, Content-Length and Content-Type each; chunked as
// the only transfer coding, and never beside Content-Length; a method this
// server implements.
std::optional<HttpResponse> framing_error(const http::request_parser<http::string_body>::value_type& h) {
  static const http::verb implemented[] = {http::verb::get,     http::verb::head,    http::verb::post, http::verb::put,
                                           http::verb::delete_, http::verb::options, http::verb::patch};
  if (std::find(std::begin(implemented), std::end(implemented), h.method()) == std::end(implemented))
    return json_error(501, "the method '" + std::string(h.method_string()) + "' is not implemented by this server");
  for (const char* single : {"authorization", "host", "content-length", "content-type"}) {
    size_t n = 0;
    for (const auto& f : h) n += iequals(std::string(f.name_string()), single) ? 1 : 0;
    if (n > 1)
      return json_error(400, "the header '" + std::string(single) + "' appears " + std::to_string(n) +
                                 " times; a request may carry it once");
  }
  std::vector<std::string> codings;
  for (const auto& f : h) {
    if (f.name() != http::field::transfer_encoding) continue;
    const std::string v(f.value());
    size_t b = 0;
    while (b <= v.size()) {
      size_t e = v.find(',', b);
      if (e == std::string::npos) e = v.size();
      const std::string c = lower(trim(v.substr(b, e - b)));
      if (!c.empty()) codings.push_back(c);
      b = e + 1;
    }
  }
  if (h.count(http::field::transfer_encoding)) {
    if (codings.empty() || codings.back() != "chunked")
      return json_error(400, "Transfer-Encoding '" + (codings.empty() ? std::string() : codings.back()) +
                                 "': a request's last transfer coding must be chunked (RFC 9112 6.3)");
    for (const auto& c : codings)
      if (c != "chunked") return json_error(501, "the transfer coding '" + c + "' is not implemented (only chunked)");
    if (codings.size() > 1) return json_error(400, "Transfer-Encoding names chunked more than once");
    if (h.count(http::field::content_length))
      return json_error(400, "a request may not carry both Transfer-Encoding and Content-Length");
  }
  return std::nullopt;
}

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
  std::map<std::string, size_t> per_address;  // open connections by client address
  size_t pushed_out = 0;                      // connections cut to make room, not yet gone
  std::atomic<bool> stopping{false};

  // mu held. The serve thread sees its read end and answers for `why`.
  static void cut(Connection& c, Cut why) {
    int expected = kNotCut;
    if (!c.cut.compare_exchange_strong(expected, why)) return;
    ::shutdown(c.socket.native_handle(), SHUT_RD);  // wakes the blocked read
  }

  void accept_loop() {
    for (;;) {
      tcp::socket socket(ioc);
      beast::error_code ec;
      acceptor.accept(socket, ec);
      std::unique_lock<std::mutex> lock(mu);
      if (stopping) return;
      if (ec) continue;
      const auto remote = socket.remote_endpoint(ec);
      if (ec) continue;
      const std::string address = remote.address().to_string();
      if (per_address[address] >= options.max_connections_per_address) {
        lock.unlock();
        refuse(std::move(socket), "this address has too many open connections (" +
                                      std::to_string(options.max_connections_per_address) + "); try again");
        continue;
      }
      if (connections.size() - pushed_out >= options.max_connections) {
        // Full: the connection that has waited longest for a request head
        // makes room (an authenticated request is never pushed out).
        Connection* oldest = nullptr;
        for (auto& c : connections)
          if (c->phase == kHead && c->cut == kNotCut && (!oldest || c->since < oldest->since)) oldest = c.get();
        if (!oldest) {
          lock.unlock();
          refuse(std::move(socket), "the server has too many open connections (" +
                                        std::to_string(options.max_connections) + "); try again");
          continue;
        }
        cut(*oldest, kPushedOut);
        ++pushed_out;
      }
      auto conn = std::make_shared<Connection>(std::move(socket), address);
      conn->begin(kHead);
      connections.push_back(conn);
      ++per_address[address];
      std::thread([this, conn] {
        serve(*conn);
        std::lock_guard<std::mutex> g(mu);
        beast::error_code ignored;
        conn->socket.close(ignored);  // under mu: cut() never meets a reused descriptor
        if (conn->cut == kPushedOut) --pushed_out;
        if (--per_address[conn->address] == 0) per_address.erase(conn->address);
        connections.remove(conn);
        cv.notify_all();
      }).detach();
    }
  }

  void refuse(tcp::socket socket, const std::string& why) {
    http::response<http::string_body> res{http::status::service_unavailable, 11};
    res.set(http::field::content_type, "application/json");
    res.body() = json_error(503, why).body;
    res.keep_alive(false);
    res.prepare_payload();
    beast::error_code ec;
    http::write(socket, res, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  void reaper_loop() {
    std::unique_lock<std::mutex> lock(mu);
    const int64_t head_limit = static_cast<int64_t>(options.head_timeout_s * 1000);
    const int64_t body_limit = static_cast<int64_t>(options.read_timeout_s * 1000);
    while (!stopping) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      const int64_t now = now_ms();
      for (auto& c : connections) {
        const int phase = c->phase;
        if (phase == kHandler) continue;
        if (now - c->since > (phase == kHead ? head_limit : body_limit)) cut(*c, kTimedOut);
      }
    }
  }

  // A read that failed: answer what the client can still be told.
  void answer_read_error(Connection& c, const beast::error_code& ec, bool head,
                         const http::request_parser<http::string_body>& parser) {
    const int why = c.cut;
    if (ec == http::error::end_of_stream) return;  // nothing of a request arrived: a quiet close
    if (why == kTimedOut)
      return send_plain(
          c, json_error(408, std::string("the request's ") + (head ? "head" : "body") + " did not arrive within " +
                                 std::to_string(head ? options.head_timeout_s : options.read_timeout_s) + " s"));
    if (why == kPushedOut)
      return send_plain(c, json_error(503, "the server is full and this connection had not sent its request head"));
    if (why == kStopping) return send_plain(c, json_error(503, "the server is shutting down"));
    if (ec == http::error::header_limit) return send_plain(c, json_error(431, "request headers too large"));
    // Beast checks Content-Length against the body limit with the headers.
    if (ec == http::error::body_limit)
      return send_plain(c, json_error(413, "the request body has " +
                                               (parser.is_header_done() && parser.content_length()
                                                    ? std::to_string(*parser.content_length())
                                                    : std::string("more")) +
                                               " bytes; the limit is " + std::to_string(options.max_body_bytes)));
    if (ec == http::error::partial_message)
      return send_plain(c, json_error(400, std::string("the request ended before its ") + (head ? "head" : "body") +
                                               " was complete"));
    if (ec.category() == http::make_error_code(http::error::bad_method).category())
      return send_plain(c, json_error(400, "malformed request: " + ec.message()));
    // A socket error: nobody to answer.
  }

  void serve(Connection& c) {
    beast::flat_buffer buffer;
    beast::error_code ec;
    while (!stopping) {
      c.begin(kHead);
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
      parser.body_limit(options.max_body_bytes);
      http::read_header(c.socket, buffer, parser, ec);
      if (ec) {
        answer_read_error(c, ec, true, parser);
        break;
      }
      const auto& h = parser.get();
      if (auto bad = framing_error(h)) {
        send_plain(c, *bad);
        break;  // the body, if any, was not read: the connection cannot be reused
      }
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
      {
        // Accepted: the body has its own deadline, and the connection is no
        // longer one that a newcomer may push out.
        std::lock_guard<std::mutex> g(mu);
        if (c.cut != kNotCut) break;
        c.begin(kBody);
      }
      if (!parser.is_done()) {
        if (h.version() >= 11 && iequals(req.header("expect"), "100-continue")) {
          asio::write(c.socket, asio::buffer(std::string("HTTP/1.1 100 Continue\r\n\r\n")), ec);
          if (ec) break;
        }
        http::read(c.socket, buffer, parser, ec);
      }
      if (ec) {
        answer_read_error(c, ec, false, parser);
        break;
      }
      c.begin(kHandler);
      req.body = std::move(parser.get().body());
      Responder r(c, parser.get().keep_alive(), parser.get().version(), stopping,
                  parser.get().method() == http::verb::head);
      try {
        handler(req, r);
      } catch (const std::exception& e) {
        r.send(json_error(500, std::string("internal error: ") + e.what()));
      }
      if (!r.sent()) r.send(json_error(500, "the handler gave no response"));
      if (!r.keep_alive()) break;
    }
    c.socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  void send_plain(Connection& c, const HttpResponse& r) { Responder(c, false, 11, stopping).send(r); }
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

bool HttpServer::stopping() const { return impl_->stopping; }

void HttpServer::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.stopping) return;
    s.stopping = true;
    if (s.acceptor.is_open()) ::shutdown(s.acceptor.native_handle(), SHUT_RDWR);  // wakes accept()
    // Connections waiting for (part of) a request end now; running handlers
    // get the grace period to answer.
    for (auto& c : s.connections)
      if (c->phase != kHandler) Impl::cut(*c, kStopping);
    s.cv.notify_all();
  }
  if (s.accept_thread.joinable()) s.accept_thread.join();
  if (s.reaper_thread.joinable()) s.reaper_thread.join();
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait_for(lock, std::chrono::duration<double>(s.options.shutdown_grace_s), [&] { return s.connections.empty(); });
  // Handlers still waiting see their client gone and return.
  for (auto& c : s.connections) ::shutdown(c->socket.native_handle(), SHUT_RDWR);
  s.cv.wait(lock, [&] { return s.connections.empty(); });
  beast::error_code ec;
  s.acceptor.close(ec);
}

}  // namespace nnsight::server
