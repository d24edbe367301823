#include "tp/rendezvous.h"

#include <cstdlib>

#include <nnsight/error.hpp>

namespace nnsight::tp {

namespace {
[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  throw ConfigError("tensor-parallel rendezvous '" + spec + "' " + why + " (expected file:///path or tcp://host:port)");
}
}  // namespace

Rendezvous Rendezvous::parse(const std::string& spec) {
  Rendezvous r;
  const std::string file = "file://", tcp = "tcp://";
  if (spec.compare(0, file.size(), file) == 0) {
    r.kind = Kind::kFile;
    r.path = spec.substr(file.size());
    if (r.path.empty() || r.path[0] != '/') bad(spec, "needs an absolute path");
    return r;
  }
  if (spec.compare(0, tcp.size(), tcp) != 0) bad(spec, "has an unknown scheme");
  r.kind = Kind::kTcp;
  std::string rest = spec.substr(tcp.size());
  size_t colon;
  if (!rest.empty() && rest[0] == '[') {  // [ipv6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      bad(spec, "has a malformed [address]:port");
    r.host = rest.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string::npos) bad(spec, "names no port");
    r.host = rest.substr(0, colon);
  }
  if (r.host.empty()) bad(spec, "names no host");
  const std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    bad(spec, "has a bad port '" + port + "'");
  r.port = std::atoi(port.c_str());
  if (r.port < 1 || r.port > 65535) bad(spec, "has a port outside 1..65535");
  return r;
}

std::string Rendezvous::str() const {
  if (kind == Kind::kFile) return "file://" + path;
  const bool v6 = host.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

bool Rendezvous::loopback() const {
  return kind == Kind::kFile || host == "localhost" || host == "::1" || host.compare(0, 4, "127.") == 0;
}

}  // namespace nnsight::tp
