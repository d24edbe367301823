// HookPoint: an identity module that gives a value inside an attached module
// a path of its own (`sae_l3.hook_sae_acts_post`), as TransformerLens's and
// SAELens's hook points do. Traces read and write it like any module output.
#pragma once

#include <ATen/core/Tensor.h>

#include "core/module.h"

namespace nnsight {

class HookPoint : public Module {
 public:
  HookPoint() : Module("HookPoint") {}
  // Returns x, or what a hook on this point replaced it with.
  at::Tensor forward(const at::Tensor& x) {
    return invoke(x, [](const at::Tensor& in) { return in; });
  }
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return x; }
};

}  // namespace nnsight
