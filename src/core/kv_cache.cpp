#include "core/kv_cache.h"

#include <ATen/ATen.h>

#include "core/lazy_zeros.h"

namespace nnsight {

KVCache KVCache::allocate(int64_t num_blocks, int64_t block_size, int64_t num_kv_heads, int64_t head_dim,
                          const at::TensorOptions& options) {
  TORCH_CHECK(num_blocks > 0 && block_size > 0 && num_kv_heads > 0 && head_dim > 0,
              "KVCache::allocate: sizes must be positive");
  // Zero-filled: padding slots of a block table point at block 0, and a
  // kernel that reads them must see finite numbers. Lazily on the CPU: the
  // default budget (EngineArgs::kv_cache_memory_mb, 1 GiB) was written in
  // full at startup, 1 GiB resident and about 0.3 s for every engine
  // however few tokens it would hold; untouched pages now cost nothing until
  // a block is first written.
  return KVCache{lazy_zeros({num_blocks, block_size, num_kv_heads, head_dim}, options),
                 lazy_zeros({num_blocks, block_size, num_kv_heads, head_dim}, options)};
}

std::vector<KVCache> allocate_kv_caches(int64_t num_layers, int64_t num_blocks, int64_t block_size,
                                        int64_t num_kv_heads, int64_t head_dim, const at::TensorOptions& options) {
  std::vector<KVCache> caches;
  caches.reserve(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i)
    caches.push_back(KVCache::allocate(num_blocks, block_size, num_kv_heads, head_dim, options));
  return caches;
}

}  // namespace nnsight
