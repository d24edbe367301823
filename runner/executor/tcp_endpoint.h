// TCP endpoints between the engine and workers started by hand
// (nnsight-worker --listen host:port): address parsing, listening,
// accepting and connecting with retries. The connection then carries the
// same framed messages (runner/executor/wire.h) as the local socket pair of a
// worker the engine started itself.
#pragma once

#include <string>

namespace nnsight::runner {

struct HostPort {
  std::string host;  // a name or a numeric IPv4/IPv6 address
  int port = 0;      // 0..65535 (0 = any free port, for listening)

  // "host:port" or "[v6]:port". Throws ConfigError naming `what` and the text.
  static HostPort parse(const std::string& text, const std::string& what);
  std::string str() const;
};

// A listening socket on `where`; sets *bound_port to the port it got (useful
// with port 0). Throws nnsight::Error when it cannot.
int listen_tcp(const HostPort& where, int* bound_port);
// Waits up to timeout_s (< 0: forever) for one connection; -1 on timeout.
int accept_tcp(int listen_fd, double timeout_s);
// Connects, retrying until timeout_s has passed (the peer may still be
// starting). Throws nnsight::Error naming the address when it cannot.
int connect_tcp(const HostPort& where, double timeout_s);

}  // namespace nnsight::runner
