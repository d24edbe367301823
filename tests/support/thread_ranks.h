// Runs a tensor-parallel group inside one test process: one thread per rank,
// each joining a real gloo group through a fresh file store (or a TCP store
// when a port is given). Exceptions thrown by any rank are rethrown.
#pragma once

#include <functional>
#include <string>

#include "tp/process_group.h"

namespace nnsight::testing {

// body(ctx) on every rank, concurrently; returns when all ranks are done.
void run_ranks(int world, const std::function<void(tp::ParallelContext&)>& body, const std::string& rendezvous = "");

// A free TCP port on 127.0.0.1 (bound and released; for TCP rendezvous).
int free_tcp_port();

}  // namespace nnsight::testing
