// WeightSource: where model weights come from, under Hugging Face tensor
// names, whatever the file format. Loaders (GGUF, safetensors / HF
// directory) implement it; model layers pull their tensors (or their
// tensor-parallel shard of them) through it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model_config.h"

namespace nnsight {

// A contiguous range [start, start + length) along one dimension of a tensor;
// dim = -1 means the whole tensor.
struct ShardSlice {
  int64_t dim = -1;
  int64_t start = 0;
  int64_t length = 0;
  static ShardSlice whole() { return {}; }
  static ShardSlice rows(int64_t start, int64_t length) { return {0, start, length}; }
  static ShardSlice cols(int64_t start, int64_t length) { return {1, start, length}; }
  bool is_whole() const { return dim < 0; }
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // The file or directory the weights come from, for messages.
  virtual const std::string& describe() const = 0;
  // Architecture hyper-parameters stored with the weights.
  virtual const ModelConfig& config() const = 0;
  // Hugging Face names of every tensor available.
  virtual std::vector<std::string> names() const = 0;
  virtual bool has(const std::string& name) const = 0;
  // Shape in PyTorch order (a Linear weight is [out, in]). Throws LoadError if absent.
  virtual std::vector<int64_t> shape(const std::string& name) const = 0;
  // The tensor (or a slice of it) as float32 on the CPU, dequantized, with any
  // format-specific layout undone (GGUF's q/k row permutation, GPT-2's Conv1D
  // transpose), so it equals the Hugging Face parameter. Throws LoadError
  // naming the file and tensor when the data is bad or absent.
  virtual at::Tensor load(const std::string& name, ShardSlice slice = ShardSlice::whole()) const = 0;
};

// Opens a .gguf file, a Hugging Face directory (config.json + *.safetensors),
// or a single .safetensors file with a config.json beside it.
std::unique_ptr<WeightSource> open_weights(const std::string& path);

}  // namespace nnsight
