// Store: the small key-value store the ranks of a group rendezvous through
// (a c10d FileStore or TCPStore underneath, see tp/rendezvous.h). Gloo sets
// up its connections through it; the NCCL backend exchanges its unique id.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tp/rendezvous.h"

namespace nnsight::tp {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Waits (up to the store's timeout) until the key is set; throws nnsight::Error on timeout.
  virtual std::vector<uint8_t> get(const std::string& key) = 0;
};

// Opens (rank 0 of a TCP rendezvous: serves) the store. Waits up to
// `timeout` for the other ranks; throws nnsight::Error naming the
// rendezvous when it cannot.
std::shared_ptr<Store> open_store(const Rendezvous& where, int rank, int world_size, std::chrono::milliseconds timeout);

}  // namespace nnsight::tp
