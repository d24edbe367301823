// HttpClient: the remote LanguageModel's plain HTTP/1.1 client (Boost.Beast,
// synchronous, one connection per request). TLS is left to a local proxy
// (docs/server.md): the URL must be http://host:port.
#pragma once

#include <string>

namespace nnsight::remote {

struct HttpResult {
  int status = 0;
  std::string body;
  std::string content_type;
};

class HttpClient {
 public:
  // Throws nnsight::ConfigError for a URL that is not http://host[:port].
  HttpClient(const std::string& url, std::string api_key);

  // Throws nnsight::Error naming the server when it cannot be reached or the
  // connection breaks.
  HttpResult request(const std::string& method, const std::string& target, const std::string& body = "",
                     const std::string& content_type = "application/json") const;
  const std::string& url() const { return url_; }

 private:
  std::string url_, host_, port_, api_key_;
};

// The message of an error answer ({"error": {"message": ...}}), or the body.
std::string error_message(const HttpResult& r);

}  // namespace nnsight::remote
