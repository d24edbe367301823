// CausalLM: a decoder-only language model running on flat token batches.
//
// forward() takes the concatenated new tokens of many sequences plus one
// BatchMeta and returns the final hidden states; compute_logits() applies the
// LM head only to the rows that sample. Submodules carry Hugging Face paths
// (assign_paths is called at construction), so hooks and interventions name
// them as users know them from Python.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "batching/batch_meta.h"
#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/module.h"
#include "tp/process_group.h"

namespace nnsight {

class CausalLM : public Module {
 public:
  CausalLM(std::string type_name, ModelConfig config, tp::ParallelContext ctx, at::TensorOptions options);

  // tokens: [T] int64 -> [T, hidden] after the final norm. kv: one cache per layer.
  virtual at::Tensor forward(const at::Tensor& tokens, const batching::BatchMeta& meta, std::vector<KVCache>& kv) = 0;
  // hidden: [T, hidden], rows: [S] int64 -> [S, vocab] float32 (whole vocabulary on every rank).
  virtual at::Tensor compute_logits(const at::Tensor& hidden, const at::Tensor& rows) = 0;

  // Loads this rank's shard of every parameter. Throws LoadError naming the
  // file and the missing or malformed tensor.
  void load(const WeightSource& source);

  const ModelConfig& config() const { return config_; }
  const tp::ParallelContext& parallel() const { return ctx_; }
  const at::TensorOptions& options() const { return options_; }

  // KV cache geometry on this rank.
  int64_t num_layers() const { return config_.num_layers; }
  virtual int64_t local_kv_heads() const = 0;
  int64_t head_dim() const { return config_.head_dim; }

 protected:
  ModelConfig config_;
  tp::ParallelContext ctx_;
  at::TensorOptions options_;
};

// Throws nnsight::ConfigError, naming the counts, when a model of `config`
// cannot be split over `world_size` tensor-parallel ranks (the checks the
// constructors make, without building anything).
void check_tensor_parallel(const ModelConfig& config, int world_size);

// Builds the architecture config.architecture names, with zero weights.
std::shared_ptr<CausalLM> create_causal_lm(const ModelConfig& config, const tp::ParallelContext& ctx,
                                           const at::TensorOptions& options);

// Builds the model the source describes and loads its weights.
std::shared_ptr<CausalLM> load_causal_lm(const WeightSource& source, const tp::ParallelContext& ctx,
                                         const at::TensorOptions& options);

}  // namespace nnsight
