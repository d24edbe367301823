// WeightSource: where model weights come from, under Hugging Face tensor
// names, whatever the file format. Loaders (GGUF, safetensors / HF
// directory) implement it; model layers pull their tensors (or their
// tensor-parallel shard of them) through it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/kernels/packed_matrix.h"
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
  // The same tensor (or slice) kept in its block-quantized encoding, when the
  // source stores it so, was opened to serve packed weights, and the slice is
  // whole blocks; std::nullopt otherwise (the caller then uses load()). A
  // packed matrix is [rows, cols] = the 2-D Hugging Face shape with the same
  // layout undone (GGUF's q/k permutation as a row index), and keeps the
  // file's mapping alive.
  virtual std::optional<kernels::PackedMatrix> load_packed(const std::string& name,
                                                           ShardSlice slice = ShardSlice::whole()) const {
    (void)name;
    (void)slice;
    return std::nullopt;
  }
};

struct OpenWeightsOptions {
  // Serve block-quantized GGUF tensors packed (load_packed) instead of only
  // dequantized, where this CPU has the fused packed kernels (AVX-512 F, BW,
  // VL; elsewhere the portable packed path is slower than float32, so the
  // weights are dequantized anyway). Off: load_packed always answers
  // std::nullopt. (GgufWeights(path, true) serves packed tensors on any CPU.)
  bool keep_packed = false;
  OpenWeightsOptions& packed(bool v) {
    keep_packed = v;
    return *this;
  }
};

// Opens a .gguf file, a Hugging Face directory (config.json + *.safetensors),
// or a single .safetensors file with a config.json beside it.
std::unique_ptr<WeightSource> open_weights(const std::string& path, const OpenWeightsOptions& options = {});

}  // namespace nnsight
