#include "models/activation.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "core/kernels/silu.h"

namespace nnsight {

namespace {
const char* type_name_of(Activation::Kind k) {
  switch (k) {
    case Activation::Kind::kSiLU:
      return "SiLU";
    case Activation::Kind::kGeluTanh:
      return "NewGELUActivation";
    case Activation::Kind::kGelu:
      return "GELUActivation";
    case Activation::Kind::kRelu:
      return "ReLU";
  }
  return "Activation";
}
}  // namespace

Activation::Kind Activation::parse(const std::string& name) {
  if (name == "silu" || name == "swish") return Kind::kSiLU;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Kind::kGeluTanh;
  if (name == "gelu") return Kind::kGelu;
  if (name == "relu") return Kind::kRelu;
  throw ConfigError("hidden_act '" + name + "' is not supported (silu, gelu, gelu_new, gelu_pytorch_tanh, relu)");
}

Activation::Activation(Kind kind) : Module(type_name_of(kind)), kind_(kind) {}

at::Tensor Activation::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) {
    switch (kind_) {
      case Kind::kSiLU:
        return kernels::silu(in);
      case Kind::kGeluTanh:
        return at::gelu(in, "tanh");
      case Kind::kGelu:
        return at::gelu(in);
      case Kind::kRelu:
        return at::relu(in);
    }
    return in;
  });
}

at::Tensor Activation::forward_gated(const at::Tensor& gate, const at::Tensor& up) {
  if (kind_ == Kind::kSiLU && !has_hooks()) return kernels::silu_mul(gate, up);
  return forward(gate) * up;
}

}  // namespace nnsight
