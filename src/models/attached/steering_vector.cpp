#include "models/attached/steering_vector.h"

#include <ATen/ATen.h>

namespace nnsight {

SteeringVector::SteeringVector(std::string source, at::Tensor vector)
    : AttachedModule("SteeringVector", std::move(source), vector.size(0)), vector_(std::move(vector)) {
  coeff = register_module("coeff", std::make_shared<HookPoint>());
}

void SteeringVector::to_options(const at::TensorOptions& options) {
  vector_ = vector_.to(options.device(), options.dtype().toScalarType()).contiguous();
}

std::optional<at::Tensor> SteeringVector::run_at_host(const at::Tensor& x) {
  at::Tensor zeros = at::zeros({x.size(0), 1}, x.options());  // [rows, 1]
  at::Tensor c = coeff->forward(zeros);
  at::Tensor body_out;
  at::Tensor y = invoke(x, [&](const at::Tensor& in) {
    body_out = c.is_same(zeros) ? in : in + c.to(in.scalar_type()) * vector_.to(in.scalar_type());
    return body_out;
  });
  if (y.is_same(x)) return std::nullopt;
  return y;
}

}  // namespace nnsight
