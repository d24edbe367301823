// A plain (replicated) embedding table, e.g. GPT-2's position embeddings.
#pragma once

#include <ATen/core/Tensor.h>

#include "core/module.h"

namespace nnsight {

class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, const at::TensorOptions& options);
  at::Tensor forward(const at::Tensor& ids);  // [T] int64 -> [T, dim]
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }
  void load_weights(const WeightSource& source) override;
  int64_t num_embeddings() const { return weight.size(0); }
  at::Tensor weight;  // [num, dim]
};

}  // namespace nnsight
