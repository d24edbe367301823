#include "models/attached/sparse_autoencoder.h"

#include <ATen/ATen.h>

namespace nnsight {

at::Tensor SaeEncoder::forward(const at::Tensor& x) {
  at::Tensor body_out;
  at::Tensor y = invoke(x, [&](const at::Tensor& in) {
    sae_.edited_ |= !in.is_same(x);
    const SaeWeights& w = sae_.w_;
    at::Tensor sae_in = sae_.through(*sae_.hook_sae_input, w.apply_b_dec_to_input ? in - w.b_dec : in);
    at::Tensor pre = sae_.through(*sae_.hook_sae_acts_pre, at::addmm(w.b_enc, sae_in, w.W_enc));  // [rows, d_sae]
    body_out = sae_.through(*sae_.hook_sae_acts_post, sae_.activate(pre));
    return body_out;
  });
  sae_.edited_ |= !y.is_same(body_out);
  return y;
}

at::Tensor SaeDecoder::forward(const at::Tensor& acts) {
  at::Tensor body_out;
  at::Tensor y = invoke(acts, [&](const at::Tensor& in) {
    sae_.edited_ |= !in.is_same(acts);
    body_out = sae_.through(*sae_.hook_sae_recons, at::addmm(sae_.w_.b_dec, in, sae_.w_.W_dec));  // [rows, d_out]
    return body_out;
  });
  sae_.edited_ |= !y.is_same(body_out);
  return y;
}

SparseAutoencoder::SparseAutoencoder(std::string source, SaeWeights weights)
    : AttachedModule("SAE", std::move(source), weights.W_enc.size(0)), w_(std::move(weights)) {
  TORCH_CHECK(w_.W_enc.dim() == 2 && w_.W_dec.dim() == 2 && w_.W_dec.size(0) == w_.W_enc.size(1));
  TORCH_CHECK(w_.activation != SaeActivation::kTopK || (w_.k > 0 && w_.k <= w_.W_enc.size(1)));
  TORCH_CHECK(w_.activation != SaeActivation::kJumpReLU || w_.threshold.defined());
  encode = register_module("encode", std::make_shared<SaeEncoder>(*this));
  decode = register_module("decode", std::make_shared<SaeDecoder>(*this));
  hook_sae_input = register_module("hook_sae_input", std::make_shared<HookPoint>());
  hook_sae_acts_pre = register_module("hook_sae_acts_pre", std::make_shared<HookPoint>());
  hook_sae_acts_post = register_module("hook_sae_acts_post", std::make_shared<HookPoint>());
  hook_sae_recons = register_module("hook_sae_recons", std::make_shared<HookPoint>());
  if (!is_transcoder()) {
    hook_sae_error = register_module("hook_sae_error", std::make_shared<HookPoint>());
    hook_sae_output = register_module("hook_sae_output", std::make_shared<HookPoint>());
  }
}

void SparseAutoencoder::to_options(const at::TensorOptions& options) {
  for (at::Tensor* t : {&w_.W_enc, &w_.b_enc, &w_.W_dec, &w_.b_dec, &w_.threshold})
    if (t->defined()) *t = t->to(options.device(), options.dtype().toScalarType()).contiguous();
}

at::Tensor SparseAutoencoder::activate(const at::Tensor& pre) const {
  switch (w_.activation) {
    case SaeActivation::kReLU:
      return at::relu(pre);
    case SaeActivation::kJumpReLU:
      return at::relu(pre) * (pre > w_.threshold).to(pre.scalar_type());
    case SaeActivation::kTopK: {
      auto top = at::topk(pre, w_.k, /*dim=*/-1);
      return at::zeros_like(pre).scatter_(-1, std::get<1>(top), at::relu(std::get<0>(top)));
    }
  }
  return pre;
}

at::Tensor SparseAutoencoder::encode_plain(const at::Tensor& x) const {
  at::Tensor sae_in = w_.apply_b_dec_to_input ? x - w_.b_dec : x;
  return activate(at::addmm(w_.b_enc, sae_in, w_.W_enc));
}

at::Tensor SparseAutoencoder::decode_plain(const at::Tensor& acts) const { return at::addmm(w_.b_dec, acts, w_.W_dec); }

at::Tensor SparseAutoencoder::call(const at::Tensor& x) { return decode_plain(encode_plain(x)); }

at::Tensor SparseAutoencoder::through(HookPoint& point, const at::Tensor& v) {
  at::Tensor y = point.forward(v);
  edited_ |= !y.is_same(v);
  return y;
}

std::optional<at::Tensor> SparseAutoencoder::run_at_host(const at::Tensor& host_out) {
  edited_ = false;
  const at::Tensor x = host_out.to(w_.W_enc.scalar_type());  // [rows, d_in]
  at::Tensor recons = decode->forward(encode->forward(x));
  if (is_transcoder()) return std::nullopt;
  // The reconstruction of the unedited x: recomputed only when a hook edited
  // something (same shapes and inputs, so unedited rows get the same bits).
  const bool edited_before_error = edited_;
  at::Tensor clean = edited_before_error ? decode_plain(encode_plain(x)) : recons;
  at::Tensor error = through(*hook_sae_error, x - clean);
  at::Tensor output = through(*hook_sae_output, recons + error);
  if (!edited_) return std::nullopt;
  at::Tensor clean_output = clean + (x - clean);
  return host_out + (output - clean_output).to(host_out.scalar_type());
}

}  // namespace nnsight
