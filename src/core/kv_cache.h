// KVCache: one layer's preallocated paged key/value storage. Block b holds
// positions [b * block_size, (b + 1) * block_size) of whichever sequence owns
// it (the runner's block manager hands blocks out; batching::BatchMeta's
// block tables say which).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace nnsight {

struct KVCache {
  at::Tensor key;    // [num_blocks, block_size, num_kv_heads, head_dim]
  at::Tensor value;  // [num_blocks, block_size, num_kv_heads, head_dim]

  int64_t num_blocks() const { return key.size(0); }
  int64_t block_size() const { return key.size(1); }
  int64_t num_kv_heads() const { return key.size(2); }
  int64_t head_dim() const { return key.size(3); }

  static KVCache allocate(int64_t num_blocks, int64_t block_size, int64_t num_kv_heads, int64_t head_dim,
                          const at::TensorOptions& options);
};

// One KVCache per decoder layer.
std::vector<KVCache> allocate_kv_caches(int64_t num_layers, int64_t num_blocks, int64_t block_size,
                                        int64_t num_kv_heads, int64_t head_dim, const at::TensorOptions& options);

}  // namespace nnsight
