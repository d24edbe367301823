// Normalization modules (replicated on every tensor-parallel rank).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>

#include "core/module.h"

namespace nnsight {

// A normalization over the last dimension, whatever its kind.
class Norm : public Module {
 public:
  using Module::Module;
  virtual at::Tensor forward(const at::Tensor& x) = 0;  // [..., dim] -> [..., dim]
  // {residual + delta, forward(residual + delta)}: the residual stream's add
  // and this norm, fused where the norm allows it (RMSNorm without hooks).
  virtual std::pair<at::Tensor, at::Tensor> add_then_forward(const at::Tensor& residual, const at::Tensor& delta);
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }
};

// y = w * x / sqrt(mean(x^2) + eps); with unit_offset (Gemma), y = (1 + w) * ...
// (the stored weight stays Hugging Face's parameter).
class RMSNorm : public Norm {
 public:
  RMSNorm(std::string type_name, int64_t dim, double eps, const at::TensorOptions& options, bool unit_offset = false);
  at::Tensor forward(const at::Tensor& x) override;  // [..., dim] -> [..., dim]
  std::pair<at::Tensor, at::Tensor> add_then_forward(const at::Tensor& residual, const at::Tensor& delta) override;
  void load_weights(const WeightSource& source) override;
  at::Tensor weight;  // [dim]

 private:
  double eps_;
  bool unit_offset_;
};

class LayerNorm : public Norm {
 public:
  LayerNorm(int64_t dim, double eps, const at::TensorOptions& options);
  at::Tensor forward(const at::Tensor& x) override;  // [..., dim] -> [..., dim]
  void load_weights(const WeightSource& source) override;
  at::Tensor weight;  // [dim]
  at::Tensor bias;    // [dim]

 private:
  double eps_;
};

}  // namespace nnsight
