// Normalization modules (replicated on every tensor-parallel rank).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "core/module.h"

namespace nnsight {

class RMSNorm : public Module {
 public:
  RMSNorm(std::string type_name, int64_t dim, double eps, const at::TensorOptions& options);
  at::Tensor forward(const at::Tensor& x);  // [T, dim] -> [T, dim]
  void load_weights(const WeightSource& source) override;
  at::Tensor weight;  // [dim]

 private:
  double eps_;
};

class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, double eps, const at::TensorOptions& options);
  at::Tensor forward(const at::Tensor& x);  // [T, dim] -> [T, dim]
  void load_weights(const WeightSource& source) override;
  at::Tensor weight;  // [dim]
  at::Tensor bias;    // [dim]

 private:
  double eps_;
};

}  // namespace nnsight
