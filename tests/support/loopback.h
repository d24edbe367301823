// Raw TCP connections to a server on loopback, for the tests that speak HTTP
// byte by byte (framing errors, half-closed and slow clients).
#pragma once

#include <string>

namespace nnsight::testing {

// A connected socket to 127.0.0.1:`port` (an EXPECT fails when it cannot
// connect); reads time out after `recv_timeout_s` seconds.
int connect_loopback(int port, int recv_timeout_s = 10);

// Sends `text` on a new connection and reads until the server closes it; with
// `half_close`, shuts the sending side first (shutdown(SHUT_WR)).
std::string exchange_loopback(int port, const std::string& text, bool half_close = false, int recv_timeout_s = 10);

}  // namespace nnsight::testing
