#include "models/norms.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "core/gradient_forward.h"
#include "core/kernels/add.h"
#include "core/kernels/rms_norm.h"

namespace nnsight {

namespace {
at::Tensor load_vector(const WeightSource& src, const std::string& name, int64_t dim) {
  if (src.shape(name) != std::vector<int64_t>{dim}) {
    throw LoadError(src.describe() + ": tensor '" + name + "' should have shape [" + std::to_string(dim) + "]");
  }
  return src.load(name);
}
}  // namespace

RMSNorm::RMSNorm(std::string type_name, int64_t dim, double eps, const at::TensorOptions& options, bool unit_offset)
    : Norm(std::move(type_name)), eps_(eps), unit_offset_(unit_offset) {
  weight = register_parameter("weight", unit_offset ? at::zeros({dim}, options) : at::ones({dim}, options), false);
}

at::Tensor RMSNorm::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) {
    const at::Tensor w = unit_offset_ ? weight + 1.0 : weight;
    if (in.dim() == 2) return kernels::rms_norm(in, w, eps_);
    // Per-head norms see [T, heads, head_dim]: normalize each row of the last dimension.
    return kernels::rms_norm(in.reshape({-1, in.size(-1)}), w, eps_).view(in.sizes());
  });
}

std::pair<at::Tensor, at::Tensor> Norm::add_then_forward(const at::Tensor& residual, const at::Tensor& delta) {
  at::Tensor sum = kernels::add(residual, delta);
  at::Tensor normed = forward(sum);
  return {std::move(sum), std::move(normed)};
}

std::pair<at::Tensor, at::Tensor> RMSNorm::add_then_forward(const at::Tensor& residual, const at::Tensor& delta) {
  // Hooks see this module's input and may change it: they need the sum first.
  if (has_hooks() || unit_offset_ || residual.dim() != 2) return Norm::add_then_forward(residual, delta);
  return kernels::add_rms_norm(residual, delta, weight, eps_);
}

void RMSNorm::load_weights(const WeightSource& source) {
  weight.copy_(load_vector(source, path() + ".weight", weight.size(0)));
}

LayerNorm::LayerNorm(int64_t dim, double eps, const at::TensorOptions& options) : Norm("LayerNorm"), eps_(eps) {
  weight = register_parameter("weight", at::ones({dim}, options), false);
  bias = register_parameter("bias", at::zeros({dim}, options), false);
}

at::Tensor LayerNorm::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) {
    // A gradient forward saves the weight for the backward, which autograd
    // cannot do with a worker's weights (inference tensors): copies then.
    if (GradientForward::active()) return at::layer_norm(in, {weight.size(0)}, weight.clone(), bias.clone(), eps_);
    return at::layer_norm(in, {weight.size(0)}, weight, bias, eps_);
  });
}

void LayerNorm::load_weights(const WeightSource& source) {
  weight.copy_(load_vector(source, path() + ".weight", weight.size(0)));
  bias.copy_(load_vector(source, path() + ".bias", bias.size(0)));
}

}  // namespace nnsight
