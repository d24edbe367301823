#include "batching/batch_groups.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace nnsight::batching {

RowRange BatchGroup::rows(RowLevel level) const {
  TORCH_CHECK(level != RowLevel::kRouted, "BatchGroup::rows: routed rows need the module's row tokens (routed_rows)");
  TORCH_CHECK(level != RowLevel::kSequence, "BatchGroup::rows: sequence rows need the sequence (sequence_rows)");
  if (level == RowLevel::kToken) return RowRange{token_start, num_tokens};
  return sample_row >= 0 ? RowRange{sample_row, 1} : RowRange{0, 0};
}

void BatchGroups::clear() {
  groups_.clear();
  by_id_.clear();
  by_sample_row_.clear();
  num_tokens_ = 0;
  num_sampling_ = 0;
}

void BatchGroups::reserve(size_t n) {
  groups_.reserve(n);
  by_id_.reserve(n);
  by_sample_row_.reserve(n);
}

void BatchGroups::add(const BatchGroup& g) {
  TORCH_CHECK(g.token_start == num_tokens_, "BatchGroups: group ", g.id, " starts at row ", g.token_start,
              ", expected ", num_tokens_, " (groups are added in flat-batch order)");
  TORCH_CHECK(g.sample_row < 0 || g.sample_row == num_sampling_, "BatchGroups: group ", g.id, " samples row ",
              g.sample_row, ", expected ", num_sampling_);
  const bool inserted = by_id_.emplace(g.id, groups_.size()).second;
  TORCH_CHECK(inserted, "BatchGroups: request ", g.id, " appears twice in one step");
  if (g.sample_row >= 0) {
    by_sample_row_.push_back(groups_.size());
    ++num_sampling_;
  }
  num_tokens_ += g.num_tokens;
  groups_.push_back(g);
}

const BatchGroup* BatchGroups::find(uint64_t request_id) const {
  auto it = by_id_.find(request_id);
  return it == by_id_.end() ? nullptr : &groups_[it->second];
}

const BatchGroup* BatchGroups::owner_of_row(int64_t row, RowLevel level) const {
  if (row < 0) return nullptr;
  if (level == RowLevel::kPrompt) {
    return row < num_sampling_ ? &groups_[by_sample_row_[static_cast<size_t>(row)]] : nullptr;
  }
  // Groups are in flat-batch order: the owner is the last one starting at or before `row`.
  auto it = std::upper_bound(groups_.begin(), groups_.end(), row,
                             [](int64_t r, const BatchGroup& g) { return r < g.token_start; });
  if (it == groups_.begin()) return nullptr;
  --it;
  return row < it->token_start + it->num_tokens ? &*it : nullptr;
}

at::Tensor narrow_rows(const at::Tensor& t, RowRange r) { return t.narrow(0, r.start, r.count); }

RowRange sequence_rows(const BatchGroup& g, int64_t sequence_start, const at::Tensor& t) {
  if (g.num_tokens == 0 || g.token_start != sequence_start || t.dim() == 0) return RowRange{0, 0};
  return RowRange{0, t.size(0)};
}

void routed_rows(const BatchGroup& g, const at::Tensor& row_tokens, RowRanges& out) {
  TORCH_CHECK(row_tokens.scalar_type() == at::kLong && row_tokens.dim() == 1, "routed_rows: int64 [rows] expected");
  const at::Tensor host = row_tokens.device().is_cpu() ? row_tokens.contiguous() : row_tokens.cpu();
  const int64_t* tok = host.data_ptr<int64_t>();
  const int64_t lo = g.token_start, hi = g.token_start + g.num_tokens;
  const size_t first = out.size();
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (tok[i] < lo || tok[i] >= hi) continue;
    if (out.size() > first && out.back().start + out.back().count == i)
      ++out.back().count;
    else
      out.push_back(RowRange{i, 1});
  }
}

at::Tensor gather_rows(const at::Tensor& t, const RowRanges& ranges) {
  if (ranges.empty()) return t.narrow(0, 0, 0);
  if (ranges.size() == 1) return narrow_rows(t, ranges[0]);
  std::vector<at::Tensor> parts;
  parts.reserve(ranges.size());
  for (const auto& r : ranges) parts.push_back(narrow_rows(t, r));
  return at::cat(parts, 0);
}

int64_t count_rows(const RowRanges& ranges) {
  int64_t n = 0;
  for (const auto& r : ranges) n += r.count;
  return n;
}

void write_rows(at::Tensor& target, const RowRanges& ranges, const at::Tensor& value) {
  std::vector<int64_t> shape = target.sizes().vec();
  TORCH_CHECK(!shape.empty(), "write_rows: the target has no rows");
  shape[0] = count_rows(ranges);
  at::Tensor v = value.to(target.device(), target.scalar_type()).expand(shape);
  int64_t off = 0;
  for (const auto& r : ranges) {
    narrow_rows(target, r).copy_(v.narrow(0, off, r.count));
    off += r.count;
  }
}

}  // namespace nnsight::batching
