// BatchUploader: the step's token ids and metadata, packed into one buffer
// and copied once, read back as the same typed tensors (on the CPU here; the
// GPU check runs the engine through it on CUDA).
#include "batching/batch_upload.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "support/seq_slots.h"

namespace nnsight {
namespace {

TEST(BatchUpload, OneBufferHoldsTheBatchAsTheSameTypedTensors) {
  const std::vector<batching::SeqSlot> slots = {
      testing::seq_slot(0, std::vector<int32_t>{11, 12, 13, 14, 15}, {3, 1}, true, 10),
      testing::seq_slot(4, std::vector<int32_t>{21, 22, 23}, {0, 5}, false, 20),
      testing::seq_slot(6, std::vector<int32_t>{31}, {2, 6}, true, 30)};
  const batching::FlatBatch batch = batching::flatten_slots(slots, 4);
  batching::BatchUploader uploader(at::kCPU);
  for (int round = 0; round < 2; ++round) {  // the buffer is reused
    const batching::DeviceBatch up = uploader.upload(batch);
    const batching::BatchMeta& a = batch.meta;
    const batching::BatchMeta& b = up.meta;
    const std::vector<std::pair<at::Tensor, at::Tensor>> pairs = {
        {batch.token_ids, up.token_ids}, {a.positions, b.positions},       {a.slot_mapping, b.slot_mapping},
        {a.query_start, b.query_start},  {a.context_lens, b.context_lens}, {a.block_tables, b.block_tables},
        {a.logits_rows, b.logits_rows}};
    for (const auto& [original, moved] : pairs) {
      EXPECT_EQ(moved.scalar_type(), original.scalar_type());
      EXPECT_TRUE(at::equal(moved, original)) << original << moved;
      // Views of the one buffer, not the flattener's.
      EXPECT_TRUE(moved.storage().is_alias_of(up.token_ids.storage()));
      EXPECT_FALSE(moved.storage().is_alias_of(original.storage()));
    }
    EXPECT_EQ(b.num_tokens, a.num_tokens);
    EXPECT_EQ(b.query_start_host, a.query_start_host);
    EXPECT_EQ(b.max_context_len, a.max_context_len);
  }
}

}  // namespace
}  // namespace nnsight
