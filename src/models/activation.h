// Element-wise activation modules, hookable like any other module
// (`model.layers.3.mlp.act_fn`, `transformer.h.0.mlp.act`).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "core/module.h"

namespace nnsight {

class Activation : public Module {
 public:
  enum class Kind { kSiLU, kGeluTanh, kGelu, kRelu };
  // name: Hugging Face's hidden_act ("silu", "gelu_new", "gelu_pytorch_tanh", "gelu", "relu").
  static Kind parse(const std::string& name);
  explicit Activation(Kind kind);
  at::Tensor forward(const at::Tensor& x);
  // act(gate) * up: with no hooks on this module, a SiLU's in one pass
  // (kernels::silu_mul, the same bits as forward(gate) * up); otherwise
  // through forward, so hooks see the activation as always.
  at::Tensor forward_gated(const at::Tensor& gate, const at::Tensor& up);
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }

 private:
  Kind kind_;
};

}  // namespace nnsight
