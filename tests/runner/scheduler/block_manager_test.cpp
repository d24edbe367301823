// BlockManager: prefix identity (salt, parent chain), least-recently-used
// eviction, and the generation counter that keeps stale children from matching.
#include "runner/scheduler/block_manager.h"

#include <gtest/gtest.h>

namespace nnsight {
namespace {

using runner::BlockManager;
using runner::BlockTable;

// Allocates `tokens`, registers its full blocks as computed, and frees it.
BlockTable run_and_cache(BlockManager& m, const std::vector<int32_t>& tokens, const std::string& salt = "") {
  BlockTable t;
  EXPECT_TRUE(m.allocate(t, static_cast<int64_t>(tokens.size())));
  m.cache_full_blocks(tokens, salt, t, static_cast<int64_t>(tokens.size()));
  return t;
}

int64_t cached_tokens(BlockManager& m, const std::vector<int32_t>& tokens, const std::string& salt = "") {
  BlockTable t;
  const int64_t n = m.acquire_cached_prefix(tokens, salt, t);
  m.free(t);
  return n;
}

TEST(BlockManager, PrefixIdentityIsTokensParentAndSalt) {
  BlockManager m(8, 2, true);
  BlockTable a = run_and_cache(m, {1, 2, 3, 4, 5});
  m.free(a);
  EXPECT_EQ(cached_tokens(m, {1, 2, 3, 4, 5}), 4) << "whole blocks, leaving a token to compute";
  EXPECT_EQ(cached_tokens(m, {1, 2, 3, 4}), 2) << "at least one token is left to compute";
  EXPECT_EQ(cached_tokens(m, {1, 2, 3, 9, 5}), 2);
  EXPECT_EQ(cached_tokens(m, {9, 2, 3, 4, 5}), 0) << "a child matches only under its own parent";
  EXPECT_EQ(cached_tokens(m, {1, 2, 3, 4, 5}, "tenant-b"), 0) << "another salt never shares";
  BlockManager off(8, 2, false);
  BlockTable b = run_and_cache(off, {1, 2, 3, 4, 5});
  off.free(b);
  EXPECT_EQ(cached_tokens(off, {1, 2, 3, 4, 5}), 0);
}

TEST(BlockManager, EvictsLeastRecentlyUsedFirst) {
  BlockManager m(3, 2, true);
  BlockTable a = run_and_cache(m, {1, 2, 9});  // blocks 0 (cached) and 1
  m.free(a);
  BlockTable b = run_and_cache(m, {3, 4, 9});
  m.free(b);
  EXPECT_EQ(m.num_free(), 3);
  EXPECT_EQ(m.num_cached_blocks(), 2);
  // Using A's prefix again makes B's the least recently used.
  EXPECT_EQ(cached_tokens(m, {1, 2, 7}), 2);
  BlockTable c;
  ASSERT_TRUE(m.allocate(c, 4));  // one free block, then one eviction
  EXPECT_EQ(cached_tokens(m, {3, 4, 7}), 0) << "B's block was evicted";
  EXPECT_EQ(cached_tokens(m, {1, 2, 7}), 2) << "A's block survived";
  BlockTable d;
  EXPECT_FALSE(m.allocate(d, 6)) << "all or nothing: 3 blocks asked, 1 allocatable";
  EXPECT_TRUE(d.blocks.empty());
}

TEST(BlockManager, ReusedParentNeverMatchesItsOldChildren) {
  BlockManager m(2, 2, true);
  BlockTable a;
  ASSERT_TRUE(m.allocate(a, 4));
  m.cache_full_blocks({1, 2, 3, 4}, "", a, 4);  // block 0 = [1 2], block 1 = [3 4] after it
  // Release the parent before the child, so the parent is evicted first.
  BlockTable parent{{a.blocks[0]}, 0}, child{{a.blocks[1]}, 0};
  m.free(parent);
  m.free(child);
  BlockTable f;
  ASSERT_TRUE(m.allocate(f, 2));
  ASSERT_EQ(f.blocks[0], a.blocks[0]) << "the parent's block is reused";
  m.cache_full_blocks({5, 6, 3, 4}, "", f, 2);  // now [5 6]
  m.free(f);
  // [5 6] then [3 4]: the old child sits under the same block id, but its KV
  // followed [1 2]; only the first block may match.
  EXPECT_EQ(cached_tokens(m, {5, 6, 3, 4, 9}), 2);
}

}  // namespace
}  // namespace nnsight
