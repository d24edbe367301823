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

// Routed rows: an expert's rows in slot-major order (first choices, then
// second choices), each row naming its token row.
TEST(BatchGroups, RoutedRowsAreTheRowsOfTheRequestsTokens) {
  batching::BatchGroups g = three();
  // Tokens 1, 3, 6, 8 chose it first; tokens 0, 4, 7 second.
  const at::Tensor row_tokens = at::tensor(std::vector<int64_t>{1, 3, 6, 8, 0, 4, 7});
  batching::RowRanges r;
  batching::routed_rows(*g.find(10), row_tokens, r);
  EXPECT_EQ(r, (batching::RowRanges{{0, 2}, {4, 2}}));
  r.clear();
  batching::routed_rows(*g.find(20), row_tokens, r);
  EXPECT_EQ(r, (batching::RowRanges{{2, 1}, {6, 1}}));
  r.clear();
  batching::routed_rows(*g.find(30), row_tokens, r);
  EXPECT_EQ(r, (batching::RowRanges{{3, 1}}));
  // A request none of whose tokens came here owns no rows; gathering none gives zero rows.
  r.clear();
  batching::routed_rows(*g.find(30), at::tensor(std::vector<int64_t>{0, 1}), r);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(batching::gather_rows(at::ones({2, 3}), r).sizes(), (std::vector<int64_t>{0, 3}));
  // Appends after what is there (several requests of a promptless invoke).
  batching::RowRanges both;
  batching::routed_rows(*g.find(20), row_tokens, both);
  batching::routed_rows(*g.find(30), row_tokens, both);
  EXPECT_EQ(both, (batching::RowRanges{{2, 1}, {6, 1}, {3, 1}}));
  EXPECT_THROW(g.find(10)->rows(batching::RowLevel::kRouted), c10::Error);
}

}  // namespace
}  // namespace nnsight
