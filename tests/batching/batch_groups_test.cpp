// Batch groups: lookup by request and by row at both levels, and the row
// helpers every consumer uses.
#include "batching/batch_groups.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

namespace nnsight {
namespace {

// Rows 0-4: request 10 (samples, prompt row 0); 5-7: request 20 (a chunk,
// no sampling); 8: request 30 (prompt row 1).
batching::BatchGroups three() {
  batching::BatchGroups g;
  g.add({10, 0, 5, 0, 0, 0, false});
  g.add({20, 5, 3, 4, -1, 0, false});
  g.add({30, 8, 1, 6, 1, 2, false});
  return g;
}

TEST(BatchGroups, LookupByRequestAndRow) {
  batching::BatchGroups g = three();
  EXPECT_EQ(g.find(20)->token_start, 5);
  EXPECT_EQ(g.find(21), nullptr);
  const int64_t owners[] = {10, 10, 10, 10, 10, 20, 20, 20, 30};
  for (int64_t row = 0; row < 9; ++row)
    EXPECT_EQ(g.owner_of_row(row, batching::RowLevel::kToken)->id, static_cast<uint64_t>(owners[row])) << row;
  EXPECT_EQ(g.owner_of_row(9, batching::RowLevel::kToken), nullptr);
  EXPECT_EQ(g.owner_of_row(-1, batching::RowLevel::kToken), nullptr);
  EXPECT_EQ(g.owner_of_row(0, batching::RowLevel::kPrompt)->id, 10u);
  EXPECT_EQ(g.owner_of_row(1, batching::RowLevel::kPrompt)->id, 30u);
  EXPECT_EQ(g.owner_of_row(2, batching::RowLevel::kPrompt), nullptr);
  EXPECT_EQ(g.num_rows(batching::RowLevel::kToken), 9);
  EXPECT_EQ(g.num_rows(batching::RowLevel::kPrompt), 2);
}

TEST(BatchGroups, OutOfOrderOrDuplicateGroupsAreInternalErrors) {
  batching::BatchGroups g = three();
  EXPECT_THROW(g.add({40, 3, 1, 0, -1, 0, false}), c10::Error);  // overlaps
  EXPECT_THROW(g.add({10, 9, 1, 0, -1, 0, false}), c10::Error);  // request twice
}

TEST(BatchGroups, GatherAndWriteTouchOnlyTheRanges) {
  at::Tensor t = at::arange(18, at::kFloat).reshape({9, 2});  // [num_tokens, 2]
  batching::BatchGroups g = three();
  const batching::RowRanges mine = {g.find(10)->rows(batching::RowLevel::kToken),
                                    g.find(30)->rows(batching::RowLevel::kToken)};
  at::Tensor rows = batching::gather_rows(t, mine);  // [6, 2]
  ASSERT_EQ(rows.size(0), 6);
  EXPECT_EQ(rows[5][1].item<float>(), 17.f);
  at::Tensor one = batching::gather_rows(t, {mine[0]});
  EXPECT_EQ(one.data_ptr(), t.data_ptr()) << "one range is a view";

  at::Tensor target = t.clone();
  batching::write_rows(target, mine, at::full({6, 2}, -1.f));
  for (int64_t r = 0; r < 9; ++r) {
    const bool inside = r < 5 || r == 8;
    EXPECT_EQ(target[r][0].item<float>(), inside ? -1.f : t[r][0].item<float>()) << r;
  }
  // Broadcast: one value for every row.
  batching::write_rows(target, {g.find(20)->rows(batching::RowLevel::kToken)}, at::full({2}, 7.f));
  EXPECT_EQ(target[6][1].item<float>(), 7.f);
  EXPECT_EQ(target[8][0].item<float>(), -1.f);
  EXPECT_EQ(batching::count_rows(mine), 6);
}

}  // namespace
}  // namespace nnsight
