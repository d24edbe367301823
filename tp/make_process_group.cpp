#include "tp/make_process_group.h"

#include <nnsight/error.hpp>

#include "tp/gloo_process_group.h"
#include "tp/nccl_process_group.h"
#include "tp/rendezvous.h"
#include "tp/store.h"

namespace nnsight::tp {

std::shared_ptr<ProcessGroup> make_process_group(const ProcessGroupOptions& o) {
  if (o.backend != "gloo" && o.backend != "nccl")
    throw ConfigError("tensor-parallel backend must be gloo or nccl, got '" + o.backend + "'");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw ConfigError("tensor-parallel rank " + std::to_string(o.rank) + " is outside a world of " +
                      std::to_string(o.world_size));
  if (o.world_size == 1) return std::make_shared<SingleProcessGroup>();
  const Rendezvous where = Rendezvous::parse(o.rendezvous);
  auto store = open_store(where, o.rank, o.world_size, o.timeout);
  if (o.backend == "nccl") return make_nccl_process_group(store, o.rank, o.world_size, o.device);
  return make_gloo_process_group(store, where, o.rank, o.world_size, o.timeout);
}

}  // namespace nnsight::tp
