// SteeringVector: a direction added to a hook point's output, per request.
// Its point `coeff` holds each row's coefficient ([rows, 1], zeros); a trace
// steers its own rows by writing it (`lm.envoy("steer.coeff").output() = 4.0`),
// and the model continues with x + coeff * vector (`steer.output`). Rows whose
// coefficient nobody wrote keep x's bits. Called in a graph, it adds the
// vector once: steer(h) = h + vector.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>

#include "models/attached/attached_module.h"
#include "core/hook_point.h"

namespace nnsight {

class SteeringVector : public AttachedModule {
 public:
  SteeringVector(std::string source, at::Tensor vector);  // vector [d_in]

  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return x + vector_; }

  std::optional<at::Tensor> run_at_host(const at::Tensor& x) override;
  void to_options(const at::TensorOptions& options) override;

  std::shared_ptr<HookPoint> coeff;

 private:
  at::Tensor vector_;  // [d_in]
};

}  // namespace nnsight
