// nnsight-worker: one tensor-parallel rank of the multi-process executor.
//
//   nnsight-worker --fd N
//       started by the engine, which talks to it on the inherited socket N
//   nnsight-worker --listen HOST:PORT [--threads N]
//       started by hand (possibly on another machine): waits for one engine
//       to connect (EngineArgs.worker_addresses), serves it, then exits.
//       Prints "nnsight-worker listening on HOST:PORT" once listening (with
//       port 0, the port it got). The engine says which rank this is and
//       where the ranks rendezvous. Serve only trusted networks: the engine
//       decides what this process loads.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "runner/executor/tcp_endpoint.h"
#include "runner/executor/worker_auth.h"
#include "runner/executor/worker_loop.h"

namespace {
int usage() {
  std::fprintf(stderr,
               "usage: nnsight-worker --fd N                      (started by the nnsight engine)\n"
               "       nnsight-worker --listen HOST:PORT [--threads N] [--secret-file F]   (a rank started by hand)\n");
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  int fd = -1;
  long threads = 0;
  std::string listen;
  std::string secret_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "--fd")
      fd = std::atoi(argv[++i]);
    else if (a == "--listen")
      listen = argv[++i];
    else if (a == "--secret-file")
      secret_file = argv[++i];
    else if (a == "--threads")
      threads = std::atol(argv[++i]);
    else if (a == "--rank")
      ++i;  // accepted for compatibility; the engine assigns ranks
    else
      return usage();
  }
  if (fd >= 0) return nnsight::runner::run_worker(fd, threads);
  if (listen.empty()) return usage();
  try {
    using namespace nnsight::runner;
    HostPort where = HostPort::parse(listen, "--listen");
    int port = 0;
    const int lfd = listen_tcp(where, &port);
    where.port = port;
    const std::string secret = load_worker_secret(secret_file);
    if (secret.empty())
      std::fprintf(stderr,
                   "nnsight-worker: warning: no worker secret (--secret-file or NNSIGHT_WORKER_SECRET): whoever "
                   "reaches %s can make this process load files and libraries\n",
                   where.str().c_str());
    std::printf("nnsight-worker listening on %s\n", where.str().c_str());
    std::fflush(stdout);
    for (;;) {
      const int conn = accept_tcp(lfd, -1);
      // Nothing is read from a connection before it proves it knows the secret.
      if (!secret.empty() && !challenge_peer(conn, secret, 10.0)) {
        std::fprintf(stderr, "nnsight-worker: refused a connection that failed authentication\n");
        ::close(conn);
        continue;
      }
      ::close(lfd);
      return run_worker(conn, threads);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nnsight-worker: %s\n", e.what());
    return 1;
  }
}
