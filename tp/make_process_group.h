// Making the process group of one tensor-parallel rank from a backend name
// and a rendezvous. World size 1 makes a SingleProcessGroup: no store, no
// connections, every collective the identity.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tp/process_group.h"

namespace nnsight::tp {

struct ProcessGroupOptions {
  std::string backend = "gloo";  // "gloo" (CPU tensors) or "nccl" (CUDA tensors)
  std::string rendezvous;        // file:///path or tcp://host:port (tp/rendezvous.h); unused at world size 1
  int rank = 0;                  // this process's rank in [0, world_size)
  int world_size = 1;            // ranks in the group
  int device = 0;                // CUDA device index (nccl)
  std::chrono::milliseconds timeout{std::chrono::minutes(15)};  // rendezvous and per-collective limit (gloo)

  ProcessGroupOptions& with_backend(std::string v) {
    backend = std::move(v);
    return *this;
  }
  ProcessGroupOptions& with_rendezvous(std::string v) {
    rendezvous = std::move(v);
    return *this;
  }
  ProcessGroupOptions& with_rank(int v) {
    rank = v;
    return *this;
  }
  ProcessGroupOptions& with_world_size(int v) {
    world_size = v;
    return *this;
  }
  ProcessGroupOptions& with_device(int v) {
    device = v;
    return *this;
  }
  ProcessGroupOptions& with_timeout(std::chrono::milliseconds v) {
    timeout = v;
    return *this;
  }
};

// Throws nnsight::ConfigError for a bad backend, rank or rendezvous, and
// nnsight::Error when the ranks cannot connect within the timeout.
std::shared_ptr<ProcessGroup> make_process_group(const ProcessGroupOptions& options);

}  // namespace nnsight::tp
