// The gloo backend: LibTorch's c10d ProcessGroupGloo over TCP between the
// ranks (CPU tensors). Whether this LibTorch has it is decided at build time
// (NNSIGHT_HAVE_GLOO); without it, making one throws.
#pragma once

#include <chrono>
#include <memory>

#include "tp/process_group.h"
#include "tp/store.h"

namespace nnsight::tp {

// True when this build can make gloo groups.
bool gloo_available();

// Joins the group through `store` (from open_store). Gloo binds to the
// interface named by $GLOO_SOCKET_IFNAME, else to 127.0.0.1 when the
// rendezvous is on this machine, else to the address of this host's name.
// Collectives wait at most `timeout` for a peer.
std::shared_ptr<ProcessGroup> make_gloo_process_group(const std::shared_ptr<Store>& store, const Rendezvous& where,
                                                      int rank, int world_size, std::chrono::milliseconds timeout);

}  // namespace nnsight::tp
