#include "support/thread_ranks.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <c10/core/InferenceMode.h>

#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/scratch_dir.h"
#include "tp/make_process_group.h"

namespace nnsight::testing {

void run_ranks(int world, const std::function<void(tp::ParallelContext&)>& body, const std::string& rendezvous) {
  ScratchDir dir;
  const std::string where = rendezvous.empty() ? "file://" + dir.file("store") : rendezvous;
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        c10::InferenceMode guard;
        tp::ParallelContext ctx{tp::make_process_group(
            tp::ProcessGroupOptions().with_rank(r).with_world_size(world).with_rendezvous(where).with_timeout(
                std::chrono::seconds(60)))};
        body(ctx);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("free_tcp_port: cannot bind");
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace nnsight::testing
