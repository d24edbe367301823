// BlockTable: the KV-cache blocks of one request, in position order, and the
// prefix-cache identity of its full blocks.
#pragma once

#include <cstdint>
#include <vector>

namespace nnsight::runner {

struct BlockTable {
  std::vector<int32_t> blocks;
  int64_t num_cached_blocks = 0;  // leading blocks registered in (or taken from) the prefix cache
  void clear() {
    blocks.clear();
    num_cached_blocks = 0;
  }
};

}  // namespace nnsight::runner
