// ForwardBatch (include/nnsight/forward_hook.hpp): the public view of the
// runner's thread-local StepContext.
#include <algorithm>

#include <nnsight/forward_hook.hpp>

#include "runner/current_step.h"

namespace nnsight {

namespace {

const runner::StepContext& ctx_of(const void* p) { return *static_cast<const runner::StepContext*>(p); }

BatchRequest to_public(const runner::StepRequest& r) {
  BatchRequest b;
  b.request_id = r.id;
  b.token_start = r.token_start;
  b.num_tokens = r.num_tokens;
  b.first_position = r.num_computed;
  b.generation_step = r.num_generated;
  b.samples = r.sample_row >= 0;
  b.recompute = r.recompute;
  return b;
}

}  // namespace

uint64_t ForwardBatch::engine_step() const { return ctx_of(step_).step; }

int64_t ForwardBatch::num_tokens() const {
  const auto& reqs = *ctx_of(step_).requests;
  return reqs.empty() ? 0 : reqs.back().token_start + reqs.back().num_tokens;
}

size_t ForwardBatch::num_requests() const { return ctx_of(step_).requests->size(); }

BatchRequest ForwardBatch::request(size_t i) const {
  const auto& reqs = *ctx_of(step_).requests;
  if (i >= reqs.size())
    throw std::out_of_range("ForwardBatch::request: index " + std::to_string(i) + " of " +
                            std::to_string(reqs.size()) + " requests");
  return to_public(reqs[i]);
}

std::optional<BatchRequest> ForwardBatch::find(uint64_t request_id) const {
  for (const auto& r : *ctx_of(step_).requests)
    if (r.id == request_id) return to_public(r);
  return std::nullopt;
}

std::optional<BatchRequest> ForwardBatch::request_of_row(int64_t row) const {
  const auto& reqs = *ctx_of(step_).requests;
  // Requests are in flat-batch order: the owner is the last one starting at or before `row`.
  auto it = std::upper_bound(reqs.begin(), reqs.end(), row,
                             [](int64_t r, const runner::StepRequest& s) { return r < s.token_start; });
  if (it == reqs.begin()) return std::nullopt;
  --it;
  if (row >= it->token_start + it->num_tokens) return std::nullopt;
  return to_public(*it);
}

std::optional<ForwardBatch> current_forward_batch() {
  const runner::StepContext* ctx = runner::current_step();
  if (!ctx || !ctx->requests) return std::nullopt;
  return ForwardBatch(ctx);
}

}  // namespace nnsight
