// BatchUploader: a step's flat batch onto the device in one host-to-device
// copy. The token ids and every BatchMeta tensor are packed into one staging
// buffer (pinned on CUDA), copied once, and viewed back on the device as the
// same typed tensors -- instead of seven small copies, each a transfer and a
// launch, every step.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "batching/batch_meta.h"
#include "batching/flattener.h"

namespace nnsight::batching {

struct DeviceBatch {
  at::Tensor token_ids;  // [num_tokens] int64, on the device
  BatchMeta meta;        // tensors on the device; host copies as they were
};

class BatchUploader {
 public:
  explicit BatchUploader(const c10::Device& device);

  // The batch's token ids and metadata on the device: views of one buffer
  // filled by one copy. Valid until the next upload.
  DeviceBatch upload(const FlatBatch& batch);

 private:
  c10::Device device_;
  at::Tensor staging_;  // uint8, host (pinned on CUDA); grows to the largest step
  at::Tensor on_device_;
};

}  // namespace nnsight::batching
