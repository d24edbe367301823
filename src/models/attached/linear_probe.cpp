#include "models/attached/linear_probe.h"

#include <ATen/ATen.h>

namespace nnsight {

LinearProbe::LinearProbe(std::string source, at::Tensor weight, at::Tensor bias)
    : AttachedModule("LinearProbe", std::move(source), weight.size(1)),
      weight_(std::move(weight)),
      bias_(std::move(bias)) {}

void LinearProbe::to_options(const at::TensorOptions& options) {
  for (at::Tensor* t : {&weight_, &bias_})
    if (t->defined()) *t = t->to(options.device(), options.dtype().toScalarType()).contiguous();
}

at::Tensor LinearProbe::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) { return at::linear(in.to(weight_.scalar_type()), weight_, bias_); });
}

std::optional<at::Tensor> LinearProbe::run_at_host(const at::Tensor& x) {
  forward(x);
  return std::nullopt;
}

}  // namespace nnsight
