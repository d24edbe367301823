// Sizing a worker's KV cache: on the CPU the caches of every tensor-parallel
// rank the engine runs on this machine must fit its available memory
// together, not each on its own.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include <nnsight/error.hpp>

#include "core/available_memory.h"
#include "runner/executor/worker_setup.h"
#include "support/tiny_engine.h"

namespace nnsight {
namespace {

TEST(WorkerSetup, KvCacheOfEveryRankOnTheMachineMustFit) {
  const std::optional<int64_t> avail = available_memory_bytes();
  ASSERT_TRUE(avail.has_value()) << "no MemAvailable on this Linux machine";
  auto model = testing::tiny_llama();
  // Two fifths of what is available: one rank's cache fits, four ranks' do not.
  const int64_t mb = *avail * 2 / 5 >> 20;
  ASSERT_GT(mb, 0);
  const EngineArgs args = EngineArgs().kv_cache_memory_mb(mb);
  const int64_t blocks = runner::kv_blocks_for(args, *model, 1);
  EXPECT_GT(blocks, 0);
  try {
    runner::kv_blocks_for(args, *model, 4);
    ADD_FAILURE() << "four ranks of " << mb << " MB each accepted with " << (*avail >> 20) << " MB available";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("kv_cache_memory_mb (" + std::to_string(mb) + ")"), std::string::npos) << what;
    EXPECT_NE(what.find("each of the 4 tensor-parallel workers"), std::string::npos) << what;
    EXPECT_NE(what.find("available"), std::string::npos) << what;
  }
  // Explicit block counts are held to the same rule.
  const EngineArgs by_blocks = EngineArgs().num_kv_blocks(blocks);
  EXPECT_EQ(runner::kv_blocks_for(by_blocks, *model, 1), blocks);
  EXPECT_THROW(runner::kv_blocks_for(by_blocks, *model, 4), ConfigError);
}

}  // namespace
}  // namespace nnsight
