#include "runner/executor/tcp_endpoint.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <nnsight/error.hpp>

namespace nnsight::runner {

namespace {

// Step messages are small and latency-bound: no Nagle delay.
void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct AddrList {
  addrinfo* head = nullptr;
  ~AddrList() {
    if (head) ::freeaddrinfo(head);
  }
};

void resolve(const HostPort& where, bool passive, AddrList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(where.port);
  const int rc = ::getaddrinfo(where.host.c_str(), port.c_str(), &hints, &out.head);
  if (rc != 0) throw Error("cannot resolve " + where.str() + ": " + ::gai_strerror(rc));
}

}  // namespace

HostPort HostPort::parse(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) -> HostPort {
    throw ConfigError(what + " '" + text + "' " + why + " (expected host:port)");
  };
  HostPort hp;
  size_t colon;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("has a malformed [address]:port");
    hp.host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string::npos) return bad("names no port");
    hp.host = text.substr(0, colon);
  }
  if (hp.host.empty()) return bad("names no host");
  const std::string port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return bad("has a bad port");
  hp.port = std::atoi(port.c_str());
  if (hp.port > 65535) return bad("has a port above 65535");
  return hp;
}

std::string HostPort::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

int listen_tcp(const HostPort& where, int* bound_port) {
  AddrList addrs;
  resolve(where, true, addrs);
  std::string why = "no usable address";
  for (addrinfo* a = addrs.head; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    if (bound_port) {
      *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                             : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    }
    return fd;
  }
  throw Error("cannot listen on " + where.str() + ": " + why);
}

int accept_tcp(int listen_fd, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    int wait_ms = -1;
    if (timeout_s >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return -1;
      wait_ms = static_cast<int>(std::min<long long>(left.count(), 1 << 30));
    }
    pollfd p{listen_fd, POLLIN, 0};
    const int pr = ::poll(&p, 1, wait_ms);
    if (pr < 0 && errno != EINTR) throw Error(std::string("accept: ") + std::strerror(errno));
    if (pr <= 0) continue;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      throw Error(std::string("accept: ") + std::strerror(errno));
    }
    tune(fd);
    return fd;
  }
}

int connect_tcp(const HostPort& where, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string why;
  while (true) {
    AddrList addrs;
    resolve(where, false, addrs);
    for (addrinfo* a = addrs.head; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        why = std::strerror(errno);
        continue;
      }
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        tune(fd);
        return fd;
      }
      why = std::strerror(errno);
      ::close(fd);
    }
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error("cannot connect to the worker at " + where.str() + ": " + why);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace nnsight::runner
