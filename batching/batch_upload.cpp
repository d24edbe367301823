#include "batching/batch_upload.h"

#include <ATen/ATen.h>

#include <array>
#include <cstring>

namespace nnsight::batching {

namespace {
constexpr int64_t kAlign = 8;  // every segment can be viewed as int64

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

BatchUploader::BatchUploader(const c10::Device& device) : device_(device) {}

DeviceBatch BatchUploader::upload(const FlatBatch& batch) {
  DeviceBatch out;
  out.meta = batch.meta;
  BatchMeta& m = out.meta;
  // The tensors to move, in one order for packing and for viewing back.
  std::array<at::Tensor*, 7> parts = {&out.token_ids,  &m.positions,    &m.slot_mapping, &m.query_start,
                                      &m.context_lens, &m.block_tables, &m.logits_rows};
  out.token_ids = batch.token_ids;
  int64_t total = 0;
  std::array<int64_t, 7> offset{};
  for (size_t i = 0; i < parts.size(); ++i) {
    at::Tensor& t = *parts[i];
    if (!t.defined()) continue;
    if (!t.is_contiguous()) t = t.contiguous();
    offset[i] = total;
    total += aligned(t.numel() * static_cast<int64_t>(t.element_size()));
  }
  if (!staging_.defined() || staging_.numel() < total) {
    // Room for larger steps, so it is not reallocated step after step.
    const int64_t room = std::max<int64_t>(total * 2, 4096);
    staging_ = at::empty({room}, at::TensorOptions().dtype(at::kByte).pinned_memory(device_.is_cuda()));
    on_device_ = at::empty({room}, at::TensorOptions().dtype(at::kByte).device(device_));
  }
  uint8_t* host = staging_.data_ptr<uint8_t>();
  for (size_t i = 0; i < parts.size(); ++i) {
    const at::Tensor& t = *parts[i];
    if (t.defined()) std::memcpy(host + offset[i], t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size()));
  }
  // The one copy (asynchronous from pinned memory: the host waits for the
  // step's sampled tokens anyway, after this copy, before it packs again).
  on_device_.narrow(0, 0, total).copy_(staging_.narrow(0, 0, total), /*non_blocking=*/true);
  for (size_t i = 0; i < parts.size(); ++i) {
    at::Tensor& t = *parts[i];
    if (!t.defined()) continue;
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    t = on_device_.narrow(0, offset[i], bytes).view(t.scalar_type()).view(t.sizes());
  }
  return out;
}

}  // namespace nnsight::batching
