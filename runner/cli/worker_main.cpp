// nnsight-worker: one rank of the multi-process executor. Started by the
// engine (never by hand) as: nnsight-worker --fd N --rank R
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runner/worker_loop.h"

int main(int argc, char** argv) {
  int fd = -1, rank = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--fd") == 0) fd = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--rank") == 0) rank = std::atoi(argv[i + 1]);
  }
  if (fd < 0 || rank < 0) {
    std::fprintf(stderr, "nnsight-worker is started by the nnsight engine (usage: nnsight-worker --fd N --rank R)\n");
    return 2;
  }
  return nnsight::runner::run_worker(fd, rank);
}
