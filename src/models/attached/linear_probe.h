// LinearProbe: a linear read-out of a hook point's output, attached to the
// served model. Its output (`probe.output`) is x @ weight^T + bias
// [rows, n_out]; the model continues with x, untouched.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "models/attached/attached_module.h"

namespace nnsight {

class LinearProbe : public AttachedModule {
 public:
  // weight [n_out, d_in], bias [n_out] or undefined (checked by the loader).
  LinearProbe(std::string source, at::Tensor weight, at::Tensor bias);

  at::Tensor forward(const at::Tensor& x);  // [rows, d_in] -> [rows, n_out]
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }

  std::optional<at::Tensor> run_at_host(const at::Tensor& x) override;
  void to_options(const at::TensorOptions& options) override;

 private:
  at::Tensor weight_, bias_;
};

}  // namespace nnsight
