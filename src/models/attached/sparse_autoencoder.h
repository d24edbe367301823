// SparseAutoencoder: an SAE or transcoder in SAELens's layout, attached to
// the served model (AttachedModule).
//
//   sae_in   = x - b_dec (when apply_b_dec_to_input) or x   [rows, d_in]
//   acts_pre = sae_in @ W_enc + b_enc                         [rows, d_sae]
//   acts     = ReLU(acts_pre) | JumpReLU (ReLU where acts_pre > threshold)
//              | TopK (ReLU of the k largest of acts_pre, zeros elsewhere)
//   recons   = acts @ W_dec + b_dec                           [rows, d_out]
//   error    = x - recons of the unedited x (SAE only, d_out == d_in)
//   output   = recons + error
//
// Its points, under its path, carry SAELens's names: hook_sae_input,
// hook_sae_acts_pre, hook_sae_acts_post, hook_sae_recons, hook_sae_error,
// hook_sae_output; `encode` and `decode` are modules around the first three
// and the fourth. Spliced at its hook point the model continues with x when
// no hook changed anything, else with x + (output - unedited output): rows
// that no trace edited keep x's bits, edited rows get recons + error as in
// SAELens's use_error_term. A transcoder (d_out != d_in) only reads: its
// reconstruction belongs to another module, so the model keeps x.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>

#include "models/attached/attached_module.h"
#include "core/hook_point.h"

namespace nnsight {

enum class SaeActivation { kReLU, kJumpReLU, kTopK };

struct SaeWeights {
  at::Tensor W_enc;      // [d_in, d_sae]
  at::Tensor b_enc;      // [d_sae]
  at::Tensor W_dec;      // [d_sae, d_out]
  at::Tensor b_dec;      // [d_out]
  at::Tensor threshold;  // [d_sae], JumpReLU only
  SaeActivation activation = SaeActivation::kReLU;
  int64_t k = 0;                     // TopK only
  bool apply_b_dec_to_input = true;  // SAELens's default; a transcoder never
};

class SparseAutoencoder;

// `sae.encode`: x -> feature activations, through the input, pre and post points.
class SaeEncoder : public Module {
 public:
  explicit SaeEncoder(SparseAutoencoder& sae) : Module("SAEEncoder"), sae_(sae) {}
  at::Tensor forward(const at::Tensor& x);  // [rows, d_in] -> [rows, d_sae]
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }

 private:
  SparseAutoencoder& sae_;
};

// `sae.decode`: feature activations -> reconstruction, through the recons point.
class SaeDecoder : public Module {
 public:
  explicit SaeDecoder(SparseAutoencoder& sae) : Module("SAEDecoder"), sae_(sae) {}
  at::Tensor forward(const at::Tensor& acts);  // [rows, d_sae] -> [rows, d_out]
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }

 private:
  SparseAutoencoder& sae_;
};

class SparseAutoencoder : public AttachedModule {
 public:
  // Checked by the loader (sae_file.h); here only TORCH_CHECKs.
  SparseAutoencoder(std::string source, SaeWeights weights);

  int64_t d_sae() const { return w_.W_enc.size(1); }
  int64_t d_out() const { return w_.W_dec.size(1); }
  bool is_transcoder() const { return d_out() != d_in(); }
  const SaeWeights& weights() const { return w_; }

  // Without hooks (a graph's `call`, the clean reconstruction): [rows, d_in] -> ...
  at::Tensor encode_plain(const at::Tensor& x) const;     // [rows, d_sae]
  at::Tensor decode_plain(const at::Tensor& acts) const;  // [rows, d_out]
  // The activation function on pre-activations [rows, d_sae].
  at::Tensor activate(const at::Tensor& pre) const;

  // A graph's `call`: the reconstruction (SAELens's forward without the error term).
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override;

  std::optional<at::Tensor> run_at_host(const at::Tensor& x) override;
  void to_options(const at::TensorOptions& options) override;

  std::shared_ptr<SaeEncoder> encode;
  std::shared_ptr<SaeDecoder> decode;
  std::shared_ptr<HookPoint> hook_sae_input, hook_sae_acts_pre, hook_sae_acts_post, hook_sae_recons, hook_sae_error,
      hook_sae_output;

 private:
  friend class SaeEncoder;
  friend class SaeDecoder;
  // Runs a point; notes when a hook replaced the value.
  at::Tensor through(HookPoint& point, const at::Tensor& v);

  SaeWeights w_;
  bool edited_ = false;  // a hook replaced a value during this run_at_host
};

}  // namespace nnsight
