// BlockManager: hands out KV-cache blocks to requests and keeps a prefix
// cache of full blocks.
//
// A cached block is identified by its parent block (id and generation), its
// tokens and the request's cache salt, compared exactly on every hit, so a
// hash collision can never hand one request another's KV. A block whose
// reference count drops to zero stays cached (evictable, least recently used
// first) until its memory is needed.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include "runner/scheduler/block_table.h"

namespace nnsight::runner {

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching);

  int64_t num_blocks() const { return static_cast<int64_t>(info_.size()); }
  int64_t block_size() const { return block_size_; }
  // Blocks allocatable now: free ones plus evictable cached ones.
  int64_t num_free() const { return static_cast<int64_t>(free_.size() + evictable_.size()); }
  int64_t blocks_for(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Takes the longest cached prefix of `tokens` (whole blocks, leaving at
  // least one token to compute) into the empty `table`. Returns the number
  // of tokens it covers.
  int64_t acquire_cached_prefix(const std::vector<int32_t>& tokens, const std::string& salt, BlockTable& table);
  // Grows `table` to hold num_tokens tokens; all or nothing.
  bool allocate(BlockTable& table, int64_t num_tokens);
  // Offers the table's full blocks within the first num_computed tokens to the prefix cache.
  void cache_full_blocks(const std::vector<int32_t>& tokens, const std::string& salt, BlockTable& table,
                         int64_t num_computed);
  // Releases every block of the table and empties it.
  void free(BlockTable& table);

  bool prefix_caching() const { return prefix_caching_; }
  int64_t num_cached_blocks() const;  // blocks currently registered in the prefix cache

 private:
  struct Block {
    int32_t ref = 0;
    uint64_t generation = 0;  // bumped on every reuse, so stale children never match
    bool cached = false;
    uint64_t key = 0;
    int32_t parent = -1;
    uint64_t parent_generation = 0;
    std::vector<int32_t> tokens;
    std::string salt;
    std::list<int32_t>::iterator lru;
  };
  uint64_t key_of(int32_t parent, uint64_t parent_gen, const int32_t* tokens, const std::string& salt) const;
  int32_t find(int32_t parent, const int32_t* tokens, const std::string& salt) const;
  int32_t take_block();

  int64_t block_size_;
  bool prefix_caching_;
  std::vector<Block> info_;
  std::vector<int32_t> free_;     // ref 0, not cached
  std::list<int32_t> evictable_;  // ref 0, cached; front = least recently used
  // Hash of a block's identity -> cached blocks with that hash (collisions share a key).
  absl::flat_hash_map<uint64_t, absl::InlinedVector<int32_t, 1>> by_key_;
};

}  // namespace nnsight::runner
