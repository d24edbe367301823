// HttpServer: HTTP/1.1 on one TCP port (Boost.Beast, synchronous, one thread
// per connection up to a cap). It reads a request's headers first and asks
// the handler whether to accept it -- authentication and the body-size limit
// are decided before the body is read -- then reads the body (bounded) and
// hands the request to the handler, which answers whole or streams.
//
// Hostile clients: malformed framing, an unknown transfer coding, a repeated
// Authorization header or an unknown method get a 4xx/501 answer before the
// connection closes. Slow and idle clients cannot hold threads: a request's
// head must arrive within head_timeout_s and its body within read_timeout_s
// (408 then). One address holds at most max_connections_per_address
// connections, and when every slot is taken a newcomer pushes out the
// connection that has waited longest for a request head -- so clients that
// never get past the precheck (no valid key) cannot keep everyone else out.
// A client that half-closes after its request is answered normally.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace nnsight::server {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string path;                            // "/v1/traces/abc" (no query)
  std::map<std::string, std::string> query;    // "?wait=1" -> {"wait": "1"}
  std::map<std::string, std::string> headers;  // names lower-case
  std::string body;

  std::string header(const std::string& lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// What a handler answers with. send() once, or start_stream() then write()s.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  // By value: a large body (saves) is moved, not copied.
  virtual void send(HttpResponse response) = 0;
  // Sends the status line and headers of a response whose body ends when the
  // connection closes (server-sent events, long downloads).
  virtual bool start_stream(int status, const std::string& content_type) = 0;
  // False once the client is gone.
  virtual bool write(const std::string& data) = 0;
  // Whether the client is gone (checked without blocking). A client that only
  // half-closed (shutdown(SHUT_WR) after its request) is still there.
  virtual bool client_gone() = 0;
  // Whether the server is stopping: a handler should end its request with an
  // error answer (503) rather than wait for it.
  virtual bool server_stopping() { return false; }
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // address to listen on
  int port = 8000;                 // 0 = any free port (see HttpServer::port())
  size_t max_connections = 512;    // open at once (beyond: a newcomer pushes out the longest head wait, else 503)
  size_t max_connections_per_address = 64;  // open at once from one client address (beyond: 503)
  size_t max_header_bytes = 16 << 10;       // a request's head (beyond: 431)
  size_t max_body_bytes = 64 << 20;         // larger bodies are refused (413) before they are read
  double head_timeout_s = 10;               // a request's head must arrive within this (also the keep-alive idle time)
  double read_timeout_s = 30;               // its body must arrive within this, from the end of the head
  double shutdown_grace_s = 10;             // stop(): how long running handlers get to send their answer
};

class HttpServer {
 public:
  // Called after the headers (body empty): an answer refuses the request
  // before its body is read; nullopt reads the body and calls the handler.
  using Precheck = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  using Handler = std::function<void(const HttpRequest&, HttpResponder&)>;

  HttpServer(HttpServerOptions options, Precheck precheck, Handler handler);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting in a background thread. Throws nnsight::Error
  // when the address cannot be bound.
  void start();
  // Stops accepting and closes the connections that wait for a request; a
  // handler that runs gets shutdown_grace_s to answer (stopping() tells it to
  // hurry), then its connection is closed too. Joins every thread.
  void stop();
  // True once stop() began: a handler should end its request with an error
  // answer (503) rather than wait.
  bool stopping() const;
  int port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// A JSON error body in the OpenAI shape: {"error": {"message", "type", "code"}}.
HttpResponse json_error(int status, const std::string& message, const std::string& type = "");

}  // namespace nnsight::server
