#include "front/remote/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <nnsight/error.hpp>

namespace nnsight::remote {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpClient::HttpClient(const std::string& url, std::string api_key) : url_(url), api_key_(std::move(api_key)) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    throw ConfigError("remote '" + url +
                      "': https is not spoken here; reach the server through a local TLS proxy "
                      "(docs/server.md) and give its http:// address");
  if (url.rfind(scheme, 0) != 0) throw ConfigError("remote '" + url + "': expected http://host:port");
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos)
    throw ConfigError("remote '" + url + "': give the server's address without a path (http://host:port)");
  const size_t colon = rest.rfind(':');
  host_ = colon == std::string::npos ? rest : rest.substr(0, colon);
  port_ = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  if (host_.empty() || port_.empty()) throw ConfigError("remote '" + url + "': expected http://host:port");
}

HttpResult HttpClient::request(const std::string& method, const std::string& target, const std::string& body,
                               const std::string& content_type) const {
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  tcp::socket socket(ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(host_, port_, ec);
  if (!ec) asio::connect(socket, endpoints, ec);
  if (ec) throw Error("cannot reach the nnsight server at " + url_ + ": " + ec.message());
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, host_);
  req.set(http::field::user_agent, "nnsight-cpp");
  if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, content_type);
    req.body() = body;
  }
  req.keep_alive(false);
  req.prepare_payload();
  http::write(socket, req, ec);
  if (ec) throw Error("the nnsight server at " + url_ + " closed the connection: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  http::read_header(socket, buffer, parser, ec);
  // Saves run to megabytes: one allocation instead of doublings.
  if (!ec && parser.content_length()) parser.get().body().reserve(static_cast<size_t>(*parser.content_length()));
  if (!ec && !parser.is_done()) http::read(socket, buffer, parser, ec);
  if (ec && ec != http::error::end_of_stream)
    throw Error("no answer from the nnsight server at " + url_ + " (" + method + " " + target + "): " + ec.message());
  HttpResult r;
  r.status = static_cast<int>(parser.get().result_int());
  r.content_type = std::string(parser.get()[http::field::content_type]);
  r.body = std::move(parser.get().body());
  socket.shutdown(tcp::socket::shutdown_both, ec);
  return r;
}

std::string error_message(const HttpResult& r) {
  try {
    auto j = nlohmann::json::parse(r.body);
    if (j.contains("error") && j["error"].contains("message")) return j["error"]["message"].get<std::string>();
  } catch (const std::exception&) {
  }
  return "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 500);
}

}  // namespace nnsight::remote
