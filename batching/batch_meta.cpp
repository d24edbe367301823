#include "batching/batch_meta.h"

#include <ATen/ATen.h>

namespace nnsight::batching {

BatchMeta BatchMeta::to(const at::Device& device) const {
  BatchMeta m = *this;
  if (positions.defined() && positions.device() == device) return m;
  auto mv = [&](const at::Tensor& t) { return t.defined() ? t.to(device, /*non_blocking=*/true) : t; };
  m.positions = mv(positions);
  m.slot_mapping = mv(slot_mapping);
  m.query_start = mv(query_start);
  m.context_lens = mv(context_lens);
  m.block_tables = mv(block_tables);
  m.logits_rows = mv(logits_rows);
  return m;
}

BatchMeta BatchMeta::clone() const {
  BatchMeta m = *this;
  auto cp = [](const at::Tensor& t) { return t.defined() ? t.clone() : t; };
  m.positions = cp(positions);
  m.slot_mapping = cp(slot_mapping);
  m.query_start = cp(query_start);
  m.context_lens = cp(context_lens);
  m.block_tables = cp(block_tables);
  m.logits_rows = cp(logits_rows);
  return m;
}

}  // namespace nnsight::batching
