// ForwardBatch (include/nnsight/forward_hook.hpp): the public view of the
// batch groups of the step the runner is computing on this thread.
#include <nnsight/forward_hook.hpp>

#include "batching/batch_groups.h"
#include "runner/model_runner/current_step.h"

namespace nnsight {

namespace {

const batching::BatchGroups& groups_of(const void* p) { return *static_cast<const runner::StepContext*>(p)->groups; }

BatchRequest to_public(const batching::BatchGroup& g) {
  BatchRequest b;
  b.request_id = g.id;
  b.token_start = g.token_start;
  b.num_tokens = g.num_tokens;
  b.first_position = g.num_computed;
  b.generation_step = g.num_generated;
  b.samples = g.samples();
  b.recompute = g.recompute;
  return b;
}

}  // namespace

uint64_t ForwardBatch::engine_step() const { return static_cast<const runner::StepContext*>(step_)->step; }

int64_t ForwardBatch::num_tokens() const { return groups_of(step_).num_tokens(); }

size_t ForwardBatch::num_requests() const { return groups_of(step_).size(); }

BatchRequest ForwardBatch::request(size_t i) const {
  const auto& groups = groups_of(step_);
  if (i >= groups.size())
    throw std::out_of_range("ForwardBatch::request: index " + std::to_string(i) + " of " +
                            std::to_string(groups.size()) + " requests");
  return to_public(groups[i]);
}

std::optional<BatchRequest> ForwardBatch::find(uint64_t request_id) const {
  const batching::BatchGroup* g = groups_of(step_).find(request_id);
  return g ? std::optional<BatchRequest>(to_public(*g)) : std::nullopt;
}

std::optional<BatchRequest> ForwardBatch::request_of_row(int64_t row) const {
  const batching::BatchGroup* g = groups_of(step_).owner_of_row(row, batching::RowLevel::kToken);
  return g ? std::optional<BatchRequest>(to_public(*g)) : std::nullopt;
}

at::Tensor ForwardBatch::rows_of(const BatchRequest& r, const at::Tensor& t) const {
  return batching::narrow_rows(t, batching::RowRange{r.token_start, r.num_tokens});
}

std::optional<ForwardBatch> current_forward_batch() {
  const runner::StepContext* ctx = runner::current_step();
  if (!ctx || !ctx->groups) return std::nullopt;
  return ForwardBatch(ctx);
}

}  // namespace nnsight
