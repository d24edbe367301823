// Golden tests of the flattener: a step's sequences laid out as one flat
// batch, every field written out by hand.
#include "batching/flattener.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "support/seq_slots.h"

namespace nnsight {
namespace {

std::vector<int64_t> i64(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Block size 4. A: a prompt of 5 (prefill, samples). B: the middle chunk of a
// chunked prefill (4 tokens cached, 3 new, does not reach its end: no
// sampling row). C: a decode after 2 generated tokens.
std::vector<batching::SeqSlot> mixed_step() {
  auto a = testing::seq_slot(0, std::vector<int32_t>{11, 12, 13, 14, 15}, {3, 1}, true, 10);
  auto b = testing::seq_slot(4, std::vector<int32_t>{21, 22, 23}, {0, 5}, false, 20);
  auto c = testing::seq_slot(6, std::vector<int32_t>{31}, {2, 6}, true, 30);
  c.num_generated = 2;
  return {a, b, c};
}

TEST(Flattener, MixedPrefillChunkAndDecodeGolden) {
  batching::FlatBatch f = batching::flatten_slots(mixed_step(), 4);
  EXPECT_EQ(i64(f.token_ids), (std::vector<int64_t>{11, 12, 13, 14, 15, 21, 22, 23, 31}));
  const batching::BatchMeta& m = f.meta;
  EXPECT_EQ(i64(m.positions), (std::vector<int64_t>{0, 1, 2, 3, 4, 4, 5, 6, 6}));
  // A: positions 0-3 in block 3 (slots 12-15), 4 in block 1 (slot 4).
  // B: positions 4-6 in its second block, 5 (slots 20-22). C: position 6 in block 6 (slot 26).
  EXPECT_EQ(i64(m.slot_mapping), (std::vector<int64_t>{12, 13, 14, 15, 4, 20, 21, 22, 26}));
  EXPECT_EQ(i64(m.query_start), (std::vector<int64_t>{0, 5, 8, 9}));
  EXPECT_EQ(i64(m.context_lens), (std::vector<int64_t>{5, 7, 7}));
  EXPECT_EQ(i64(m.block_tables.flatten()), (std::vector<int64_t>{3, 1, 0, 5, 2, 6}));
  EXPECT_EQ(i64(m.logits_rows), (std::vector<int64_t>{4, 8}));  // A's and C's last rows; B does not sample
  EXPECT_EQ(m.num_tokens, 9);
  EXPECT_EQ(m.num_seqs, 3);
  EXPECT_EQ(m.max_query_len, 5);
  EXPECT_EQ(m.max_context_len, 7);
  EXPECT_EQ(m.query_start_host, (std::vector<int32_t>{0, 5, 8, 9}));
  EXPECT_EQ(m.context_lens_host, (std::vector<int32_t>{5, 7, 7}));
  EXPECT_EQ(m.cached_len(1), 4);

  const batching::BatchGroups& g = f.groups;
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g.num_tokens(), 9);
  EXPECT_EQ(g.num_sampling(), 2);
  EXPECT_EQ(g[0].id, 10u);
  EXPECT_EQ(g[0].rows(batching::RowLevel::kToken), (batching::RowRange{0, 5}));
  EXPECT_EQ(g[0].rows(batching::RowLevel::kPrompt), (batching::RowRange{0, 1}));
  EXPECT_EQ(g[1].rows(batching::RowLevel::kToken), (batching::RowRange{5, 3}));
  EXPECT_TRUE(g[1].rows(batching::RowLevel::kPrompt).empty());
  EXPECT_EQ(g[1].num_computed, 4);
  EXPECT_EQ(g[2].rows(batching::RowLevel::kToken), (batching::RowRange{8, 1}));
  EXPECT_EQ(g[2].rows(batching::RowLevel::kPrompt), (batching::RowRange{1, 1}));
  EXPECT_EQ(g[2].num_generated, 2);
  EXPECT_EQ(g[2].last_position(), 6);
}

TEST(Flattener, PrefillAlone) {
  batching::FlatBatch f =
      batching::flatten_slots({testing::seq_slot(0, std::vector<int32_t>{7, 8, 9}, {5}, true, 1)}, 4);
  EXPECT_EQ(i64(f.meta.positions), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(i64(f.meta.slot_mapping), (std::vector<int64_t>{20, 21, 22}));
  EXPECT_EQ(i64(f.meta.logits_rows), (std::vector<int64_t>{2}));
  EXPECT_EQ(f.groups.owner_of_row(2, batching::RowLevel::kToken)->id, 1u);
}

TEST(Flattener, DecodesOnly) {
  auto a = testing::seq_slot(3, std::vector<int32_t>{5}, {0}, true, 1);
  auto b = testing::seq_slot(8, std::vector<int32_t>{6}, {4, 2, 9}, true, 2);
  batching::FlatBatch f = batching::flatten_slots({a, b}, 4);
  EXPECT_EQ(i64(f.meta.positions), (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(i64(f.meta.slot_mapping), (std::vector<int64_t>{3, 36}));  // block 9, offset 0
  EXPECT_EQ(i64(f.meta.logits_rows), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(i64(f.meta.block_tables.flatten()), (std::vector<int64_t>{0, 0, 0, 4, 2, 9}));  // 0-padded
  EXPECT_EQ(f.meta.max_query_len, 1);
  EXPECT_EQ(f.meta.max_context_len, 9);
}

TEST(Flattener, PersistentBuffersReusedWithoutStaleRows) {
  batching::Flattener flat(/*max_tokens=*/16, /*max_seqs=*/4, /*max_blocks_per_seq=*/3, /*block_size=*/4);
  std::vector<batching::SeqSlot> first = mixed_step();
  std::vector<const batching::SeqSlot*> ptrs;
  for (const auto& s : first) ptrs.push_back(&s);
  const void* buffer = flat.flatten(ptrs).token_ids.data_ptr();
  EXPECT_EQ(flat.batch().meta.block_tables.size(1), 3);  // sized by the engine, not the step

  auto only = testing::seq_slot(1, std::vector<int32_t>{42}, {7}, true, 99);
  const batching::FlatBatch& f = flat.flatten({&only});
  EXPECT_EQ(f.token_ids.data_ptr(), buffer) << "no per-step allocation";
  EXPECT_EQ(i64(f.token_ids), (std::vector<int64_t>{42}));
  EXPECT_EQ(i64(f.meta.block_tables.flatten()), (std::vector<int64_t>{7, 0, 0}));  // the old row is gone
  EXPECT_EQ(i64(f.meta.logits_rows), (std::vector<int64_t>{0}));
  ASSERT_EQ(f.groups.size(), 1u);
  EXPECT_EQ(f.groups.find(10), nullptr) << "the previous step's groups are cleared";
  EXPECT_EQ(f.groups.find(99)->token_start, 0);
}

TEST(Flattener, RejectsWhatDoesNotFit) {
  batching::Flattener flat(4, 2, 2, 4);
  auto big = testing::seq_slot(0, 5, {0, 1});
  EXPECT_THROW(flat.flatten({&big}), std::invalid_argument);
  auto short_table = testing::seq_slot(3, 2, {0});  // needs 5 slots, has 4
  try {
    flat.flatten({&short_table});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs 5 cache slots"), std::string::npos) << e.what();
  }
  auto a = testing::seq_slot(0, 1, {0}, true, 1), b = testing::seq_slot(0, 1, {1}, true, 2),
       c = testing::seq_slot(0, 1, {2}, true, 3);
  EXPECT_THROW(flat.flatten({&a, &b, &c}), std::invalid_argument);
}

}  // namespace
}  // namespace nnsight
