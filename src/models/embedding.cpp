#include "models/embedding.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

namespace nnsight {

Embedding::Embedding(int64_t num, int64_t dim, const at::TensorOptions& options) : Module("Embedding") {
  weight = register_parameter("weight", at::zeros({num, dim}, options), false);
}

at::Tensor Embedding::forward(const at::Tensor& ids) {
  return invoke(ids, [&](const at::Tensor& in) { return at::embedding(weight, in); });
}

void Embedding::load_weights(const WeightSource& source) {
  const std::string name = path() + ".weight";
  if (source.shape(name) != std::vector<int64_t>{weight.size(0), weight.size(1)}) {
    throw LoadError(source.describe() + ": tensor '" + name + "' should have shape [" + std::to_string(weight.size(0)) +
                    ", " + std::to_string(weight.size(1)) + "]");
  }
  weight.copy_(source.load(name));
}

}  // namespace nnsight
