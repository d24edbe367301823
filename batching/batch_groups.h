// Batch groups: which rows of a step's tensors belong to which request.
//
// Three levels of rows (RowLevel):
//   token   the flat [num_tokens, ...] tensors of the forward: request r owns
//           rows [token_start, token_start + num_tokens)
//   prompt  tensors after the last-token selection ([num_sampling, ...]:
//           logits, samples, and any module that runs on the selected rows,
//           such as an LM head): r owns row sample_row, if it samples
//   routed  a subset of the token rows in an order of the module's own (an
//           MoE expert sees the tokens routed to it): the module publishes
//           each row's token row, and r owns the rows whose token is one of
//           its own (routed_rows)
//   sequence a value of one sequence at a time whose first dimension is not
//           rows at all (an attention pattern: [heads, query, key]): the
//           module fires once per sequence it computes and publishes the
//           token row where that sequence starts; r owns the whole value
//           when that row is its token_start, nothing otherwise
// Which level a module's values use is a fact of the model's structure
// (runner/model_runner/model_structure.h records it when it probes the model).
//
// Every consumer that needs a request's rows (the interleaver, forward-hook
// batch info, activation capture, built-in hooks) asks these types; none
// redoes the arithmetic.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace nnsight::batching {

enum class RowLevel : uint8_t { kToken, kPrompt, kRouted, kSequence };

// Rows [start, start + count) of dim 0.
struct RowRange {
  int64_t start = 0;
  int64_t count = 0;
  bool empty() const { return count == 0; }
  bool operator==(const RowRange& o) const { return start == o.start && count == o.count; }
};
using RowRanges = std::vector<RowRange>;

// One request's place in a step.
struct BatchGroup {
  uint64_t id = 0;
  int64_t token_start = 0;    // first row in the flat [num_tokens, ...] batch
  int64_t num_tokens = 0;     // rows it owns at token level
  int64_t num_computed = 0;   // position of its first row in its sequence
  int64_t sample_row = -1;    // its row at prompt level, -1 if it does not sample this step
  int64_t num_generated = 0;  // generation step this forward belongs to
  bool recompute = false;     // re-prefill after preemption

  bool samples() const { return sample_row >= 0; }
  // Its rows at token or prompt `level` (empty at prompt level when it does
  // not sample); routed rows come from routed_rows, sequence rows from
  // sequence_rows.
  RowRange rows(RowLevel level) const;
  int64_t last_token_row() const { return token_start + num_tokens - 1; }
  int64_t last_position() const { return num_computed + num_tokens - 1; }
};

class BatchGroups {
 public:
  void clear();
  void reserve(size_t n);
  // Groups are added in flat-batch order.
  void add(const BatchGroup& g);

  size_t size() const { return groups_.size(); }
  bool empty() const { return groups_.empty(); }
  const BatchGroup& operator[](size_t i) const { return groups_[i]; }
  std::vector<BatchGroup>::const_iterator begin() const { return groups_.begin(); }
  std::vector<BatchGroup>::const_iterator end() const { return groups_.end(); }

  int64_t num_tokens() const { return num_tokens_; }
  int64_t num_sampling() const { return num_sampling_; }
  // Rows of dim 0 at `level`.
  int64_t num_rows(RowLevel level) const { return level == RowLevel::kToken ? num_tokens_ : num_sampling_; }

  // The group of a request, or null if it is not in this step.
  const BatchGroup* find(uint64_t request_id) const;
  // The group owning `row` at `level`, or null.
  const BatchGroup* owner_of_row(int64_t row, RowLevel level) const;

 private:
  std::vector<BatchGroup> groups_;
  absl::flat_hash_map<uint64_t, size_t> by_id_;
  std::vector<size_t> by_sample_row_;  // sample row -> group index
  int64_t num_tokens_ = 0;
  int64_t num_sampling_ = 0;
};

// ---- rows of a tensor (dim 0) ----------------------------------------------------

// Appends the rows of a routed tensor that belong to `g`: row i is g's when
// row_tokens[i] (int64 [rows], the token row each row came from) lies in g's
// token rows. Consecutive rows form one range, in the module's order.
void routed_rows(const BatchGroup& g, const at::Tensor& row_tokens, RowRanges& out);

// The rows of a sequence-level value `t` (whose sequence starts at token row
// `sequence_start`) that belong to `g`: all of dim 0, or none.
RowRange sequence_rows(const BatchGroup& g, int64_t sequence_start, const at::Tensor& t);

// A view of the rows of `t` in `r`.
at::Tensor narrow_rows(const at::Tensor& t, RowRange r);
// The rows of `t` in `ranges`, concatenated in order: a view for one range (or
// none: zero rows), a copy for several.
at::Tensor gather_rows(const at::Tensor& t, const RowRanges& ranges);
// Writes `value` ([sum of counts, ...], or broadcastable to it) into the rows of
// `target` in `ranges`, in order; other rows are untouched.
void write_rows(at::Tensor& target, const RowRanges& ranges, const at::Tensor& value);
// Sum of the ranges' counts.
int64_t count_rows(const RowRanges& ranges);

}  // namespace nnsight::batching
