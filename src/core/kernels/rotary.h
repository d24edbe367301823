// Rotary position embeddings in the Hugging Face "rotate half" convention:
// for each head, x[i] and x[i + d/2] form a pair rotated by angle
// position * inv_freq[i]. (llama.cpp pairs adjacent elements instead; the
// GGUF loader undoes its q/k row permutation so this convention applies.)
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "core/model_config.h"

namespace nnsight::kernels {

class RotaryEmbedding {
 public:
  // Precomputes cos/sin for positions [0, max_position). `head_dim` is the
  // number of rotated features (a partial rotary dimension where a model
  // rotates only the first features of each head). Scaling: llama3, linear
  // (positions / factor), longrope (short factors below
  // scaling.original_max_position, long factors from there on, cos and sin
  // times the attention factor) or yarn (cos and sin times the attention
  // factor too).
  RotaryEmbedding(int64_t head_dim, int64_t max_position, double theta, const RopeScaling& scaling);

  // Rotates x in place (in a gradient forward, x becomes a rotated copy that
  // autograd records: kernel_gradients.h). x: [num_tokens, heads, D] with D >= head_dim (the
  // first head_dim features of each head turn); positions: [num_tokens] int64.
  void apply_(at::Tensor& x, const at::Tensor& positions) const;
  // apply_(q) and apply_(k); on CUDA one kernel launch for both.
  void apply_qk_(at::Tensor& q, at::Tensor& k, const at::Tensor& positions) const;

  int64_t max_position() const { return max_position_; }
  const at::Tensor& inv_freq() const { return inv_freq_; }  // [head_dim / 2] float32
  int64_t head_dim() const { return head_dim_; }
  const at::Tensor& cos_table() const { return cos_; }  // [max_position, head_dim / 2] float32
  const at::Tensor& sin_table() const { return sin_; }

 private:
  int64_t head_dim_;
  int64_t max_position_;
  at::Tensor inv_freq_;
  at::Tensor cos_;  // [max_position, head_dim / 2] float32
  at::Tensor sin_;  // [max_position, head_dim / 2] float32
  // The tables on the device the model runs on, in the activations' dtype:
  // made on the first call there, not copied host to device every call.
  mutable at::Tensor cos_device_, sin_device_;
  // cos_device_ / sin_device_ for x's device and dtype, made on first use.
  void ensure_device_tables(const at::Tensor& x) const;
};

}  // namespace nnsight::kernels
