#include "batching/batch_meta.h"

#include <ATen/ATen.h>

namespace nnsight::batching {

namespace {
// A copy of m with f applied to each defined tensor (host copies stay).
template <class F>
BatchMeta map_tensors(const BatchMeta& m, F f) {
  BatchMeta out = m;
  for (at::Tensor* t :
       {&out.positions, &out.slot_mapping, &out.query_start, &out.context_lens, &out.block_tables, &out.logits_rows})
    if (t->defined()) *t = f(*t);
  return out;
}
}  // namespace

BatchMeta BatchMeta::to(const at::Device& device) const {
  if (positions.defined() && positions.device() == device) return *this;
  return map_tensors(*this, [&](const at::Tensor& t) { return t.to(device, /*non_blocking=*/true); });
}

BatchMeta BatchMeta::clone() const {
  return map_tensors(*this, [](const at::Tensor& t) { return t.clone(); });
}

}  // namespace nnsight::batching
