// GgufWeights: a WeightSource over a llama.cpp GGUF file (architectures
// "llama" (Mixtral-style MoE too), "gpt2", "qwen3", "qwen3moe", "olmo2", "phi3", "gptneox", "gemma", "gemma2",
// "gemma3"). Serves tensors under Hugging Face names, dequantized
// to float32, with the converter's q/k row permutation undone; the ModelConfig and TokenizerSpec come from the file's
// metadata.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer_spec.h"
#include "core/weight_source.h"

namespace nnsight {

class GgufWeights final : public WeightSource {
 public:
  // Throws LoadError for a malformed file, an unsupported architecture, a
  // tensor with no Hugging Face counterpart, or inconsistent hyper-parameters.
  // keep_packed: serve block-quantized tensors through load_packed too.
  explicit GgufWeights(const std::string& path, bool keep_packed = false);
  // Entries point into file_'s tensor directory.
  GgufWeights(const GgufWeights&) = delete;
  GgufWeights& operator=(const GgufWeights&) = delete;

  const std::string& describe() const override { return file_.path(); }
  const ModelConfig& config() const override { return config_; }
  // File order; "lm_head.weight" last when the embeddings are tied (it is
  // then served from the token embedding).
  std::vector<std::string> names() const override { return order_; }
  bool has(const std::string& name) const override { return entries_.count(name) > 0; }
  std::vector<int64_t> shape(const std::string& name) const override;
  // Row slices of q/k projections dequantize only the heads they touch.
  at::Tensor load(const std::string& name, ShardSlice slice = ShardSlice::whole()) const override;
  // 2-D tensors of the packed types (kernels::PackedType), pointing into the
  // mapping; q/k rows through a row index. A column slice must be whole blocks.
  std::optional<kernels::PackedMatrix> load_packed(const std::string& name,
                                                   ShardSlice slice = ShardSlice::whole()) const override;

  TokenizerSpec tokenizer_spec() const;
  const GgufFile& file() const { return file_; }

 private:
  struct Entry {
    const GgufTensorInfo* info = nullptr;
    // > 0 for q/k projections: the number of heads whose rows llama.cpp permuted.
    int64_t permuted_heads = 0;
    // > 0 for GPT-NeoX's query_key_value: llama.cpp stores [q | k | v] blocks,
    // Hugging Face interleaves them per head; the number of heads.
    int64_t neox_qkv_heads = 0;
    // Added to every value (Gemma's norms: llama.cpp stores 1 + w).
    float offset = 0.f;
    // >= 0: this expert of a stacked [experts, rows, cols] tensor (MoE).
    int64_t expert = -1;
  };
  const Entry& entry(const std::string& name) const;
  void read_config();
  void read_gemma_config();
  void read_moe_config();
  void map_tensors();
  // Outer-dimension rows [start, start + length) as float32 [length, shape[1:]...].
  at::Tensor read_outer(const GgufTensorInfo& info, int64_t start, int64_t length) const;

  GgufFile file_;
  std::string gguf_arch_;  // general.architecture (llama.cpp's spelling: "gptneox")
  ModelConfig config_;
  std::vector<std::string> order_;
  std::unordered_map<std::string, Entry> entries_;
  bool keep_packed_ = false;
};

}  // namespace nnsight
