#include "runner/scheduler/block_manager.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace nnsight::runner {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), info_(static_cast<size_t>(num_blocks)) {
  TORCH_CHECK(num_blocks > 0 && block_size > 0, "BlockManager: sizes must be positive");
  free_.reserve(static_cast<size_t>(num_blocks));
  // Hand out low ids first (pop from the back).
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

uint64_t BlockManager::key_of(int32_t parent, uint64_t parent_gen, const int32_t* tokens,
                              const std::string& salt) const {
  // FNV-1a over the identity; exactness comes from the comparison in find().
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(static_cast<int64_t>(parent)));
  mix(parent_gen);
  for (int64_t i = 0; i < block_size_; ++i) mix(static_cast<uint32_t>(tokens[i]));
  for (char c : salt) mix(static_cast<unsigned char>(c));
  return h;
}

int32_t BlockManager::find(int32_t parent, const int32_t* tokens, const std::string& salt) const {
  const uint64_t pgen = parent >= 0 ? info_[static_cast<size_t>(parent)].generation : 0;
  const uint64_t key = key_of(parent, pgen, tokens, salt);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  for (int32_t id : it->second) {
    const Block& b = info_[static_cast<size_t>(id)];
    if (b.cached && b.parent == parent && b.parent_generation == pgen && b.salt == salt &&
        std::equal(b.tokens.begin(), b.tokens.end(), tokens))
      return id;
  }
  return -1;
}

int64_t BlockManager::acquire_cached_prefix(const std::vector<int32_t>& tokens, const std::string& salt,
                                            BlockTable& table) {
  TORCH_CHECK(table.blocks.empty(), "acquire_cached_prefix: table must be empty");
  if (!prefix_caching_ || tokens.empty()) return 0;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  int32_t parent = -1;
  for (int64_t i = 0; i < max_blocks; ++i) {
    int32_t b = find(parent, tokens.data() + i * block_size_, salt);
    if (b < 0) break;
    Block& blk = info_[static_cast<size_t>(b)];
    if (blk.ref == 0) evictable_.erase(blk.lru);
    ++blk.ref;
    table.blocks.push_back(b);
    parent = b;
  }
  table.num_cached_blocks = static_cast<int64_t>(table.blocks.size());
  return table.num_cached_blocks * block_size_;
}

int32_t BlockManager::take_block() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = evictable_.front();
    evictable_.pop_front();
    Block& old = info_[static_cast<size_t>(b)];
    auto it = by_key_.find(old.key);
    if (it != by_key_.end()) {
      auto& ids = it->second;
      ids.erase(std::remove(ids.begin(), ids.end(), b), ids.end());
      if (ids.empty()) by_key_.erase(it);
    }
    old.cached = false;
    old.tokens.clear();
    old.salt.clear();
  }
  Block& blk = info_[static_cast<size_t>(b)];
  ++blk.generation;
  blk.ref = 1;
  return b;
}

bool BlockManager::allocate(BlockTable& table, int64_t num_tokens) {
  const int64_t need = blocks_for(num_tokens) - static_cast<int64_t>(table.blocks.size());
  if (need <= 0) return true;
  if (need > num_free()) return false;
  for (int64_t i = 0; i < need; ++i) table.blocks.push_back(take_block());
  return true;
}

void BlockManager::cache_full_blocks(const std::vector<int32_t>& tokens, const std::string& salt, BlockTable& table,
                                     int64_t num_computed) {
  if (!prefix_caching_) return;
  const int64_t full = std::min<int64_t>(num_computed / block_size_, static_cast<int64_t>(table.blocks.size()));
  for (int64_t i = table.num_cached_blocks; i < full; ++i) {
    const int32_t parent = i == 0 ? -1 : table.blocks[static_cast<size_t>(i - 1)];
    const int32_t* toks = tokens.data() + i * block_size_;
    const int32_t b = table.blocks[static_cast<size_t>(i)];
    // Registered only if its parent is (the chain must be reachable) and no
    // identical block is cached already.
    if (parent >= 0 && !info_[static_cast<size_t>(parent)].cached) break;
    if (find(parent, toks, salt) >= 0) break;
    Block& blk = info_[static_cast<size_t>(b)];
    blk.parent = parent;
    blk.parent_generation = parent >= 0 ? info_[static_cast<size_t>(parent)].generation : 0;
    blk.tokens.assign(toks, toks + block_size_);
    blk.salt = salt;
    blk.key = key_of(parent, blk.parent_generation, toks, salt);
    blk.cached = true;
    by_key_[blk.key].push_back(b);
    table.num_cached_blocks = i + 1;
  }
}

void BlockManager::free(BlockTable& table) {
  // Release in reverse so a chain's tail is evicted before its head.
  for (auto it = table.blocks.rbegin(); it != table.blocks.rend(); ++it) {
    Block& blk = info_[static_cast<size_t>(*it)];
    TORCH_CHECK(blk.ref > 0, "BlockManager::free: block ", *it, " is not in use");
    if (--blk.ref == 0) {
      if (blk.cached) {
        evictable_.push_back(*it);
        blk.lru = std::prev(evictable_.end());
      } else {
        free_.push_back(*it);
      }
    }
  }
  table.clear();
}

int64_t BlockManager::num_cached_blocks() const {
  int64_t n = 0;
  for (const auto& b : info_) n += b.cached ? 1 : 0;
  return n;
}

}  // namespace nnsight::runner
