#include "core/kv_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace nnsight {
namespace {

// Resident bytes of this process (/proc/self/statm's second field).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// A cache is all zeros, but holds no memory for blocks never written: the
// engine's default budget is 1 GiB, and a small job writes a few blocks of it.
TEST(KVCache, ZeroFilledAndResidentOnlyWhereWritten) {
  const int64_t blocks = 2048, block_size = 16, kv_heads = 4, head_dim = 64;  // 32 MiB per tensor
  const int64_t before = resident_bytes();
  std::vector<KVCache> caches =
      allocate_kv_caches(2, blocks, block_size, kv_heads, head_dim, at::TensorOptions().dtype(at::kFloat));
  const int64_t allocated = resident_bytes() - before;
  EXPECT_LT(allocated, int64_t(8) << 20) << "allocating 128 MiB of KV cache made " << allocated << " bytes resident";
  ASSERT_EQ(caches.size(), 2u);
  for (const KVCache& c : caches) {
    EXPECT_EQ(c.key.sizes(), (at::IntArrayRef{blocks, block_size, kv_heads, head_dim}));
    EXPECT_EQ(c.value.sizes(), c.key.sizes());
    EXPECT_TRUE(c.key.is_contiguous());
    EXPECT_EQ(c.key.abs().max().item<float>(), 0.f);
    EXPECT_EQ(c.value.abs().max().item<float>(), 0.f);
  }
  // Written blocks keep what was written; their neighbours stay zero.
  caches[1].key[5].fill_(2.5f);
  caches[1].value[blocks - 1].fill_(-1.f);
  EXPECT_EQ(caches[1].key[5].min().item<float>(), 2.5f);
  EXPECT_EQ(caches[1].key[4].abs().max().item<float>(), 0.f);
  EXPECT_EQ(caches[1].value[blocks - 1].max().item<float>(), -1.f);
  EXPECT_EQ(caches[0].key[5].abs().max().item<float>(), 0.f);
}

}  // namespace
}  // namespace nnsight
