#include "core/kernels/rotary.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "core/kernels/cuda_kernels.h"
#include "core/kernels/kernel_gradients.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/kernel_path.h"

namespace nnsight::kernels {

namespace {

// Llama 3 frequency scaling: long wavelengths are divided by `factor`, short
// ones kept, with a smooth blend in between.
at::Tensor scale_llama3(const at::Tensor& inv_freq, const RopeScaling& sc) {
  const double low_wavelen = sc.original_max_position / sc.low_freq_factor;
  const double high_wavelen = sc.original_max_position / sc.high_freq_factor;
  at::Tensor out = inv_freq.clone();
  auto* f = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double freq = f[i];
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      f[i] = static_cast<float>(freq / sc.factor);
    } else {
      const double smooth =
          (sc.original_max_position / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
      f[i] = static_cast<float>((1.0 - smooth) * freq / sc.factor + smooth * freq);
    }
  }
  return out;
}

// YaRN (as transformers' _compute_yarn_parameters, float32): dimensions that
// turn fewer than beta_slow times over the original context are
// interpolated (divided by factor), those that turn more than beta_fast
// times extrapolated (kept), with a linear ramp over the dimensions between.
at::Tensor scale_yarn(const at::Tensor& pos_freqs, int64_t dim, double theta, const RopeScaling& sc) {
  auto correction_dim = [&](double rotations) {
    return dim * std::log(static_cast<double>(sc.original_max_position) / (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(theta));
  };
  double low = correction_dim(sc.beta_fast), high = correction_dim(sc.beta_slow);
  if (sc.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as transformers: no zero-width ramp
  const at::Tensor ramp = ((at::arange(dim / 2, at::kLong).to(at::kFloat) - low) / (high - low)).clamp(0, 1);
  const at::Tensor extrapolation = 1 - ramp;  // [dim / 2]: 1 keeps the frequency, 0 divides it by factor
  const at::Tensor inv_extrapolation = 1.0 / pos_freqs;
  const at::Tensor inv_interpolation = 1.0 / (sc.factor * pos_freqs);
  return inv_interpolation * (1 - extrapolation) + inv_extrapolation * extrapolation;
}

template <typename scalar_t>
void rotate_cpu(at::Tensor& x, int64_t rot, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t tokens = x.size(0), heads = x.size(1), d = x.size(2), half = rot / 2;
  scalar_t* xp = x.data_ptr<scalar_t>();
  const int64_t* pos = positions.data_ptr<int64_t>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  kernels::parallel_for(0, tokens, 16, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* c = cp + pos[t] * half;
      const float* s = sp + pos[t] * half;
      for (int64_t h = 0; h < heads; ++h) {
        scalar_t* row = xp + (t * heads + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = static_cast<float>(row[i]);
          const float x2 = static_cast<float>(row[i + half]);
          row[i] = static_cast<scalar_t>(x1 * c[i] - x2 * s[i]);
          row[i + half] = static_cast<scalar_t>(x2 * c[i] + x1 * s[i]);
        }
      }
    }
  });
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, int64_t max_position, double theta, const RopeScaling& scaling)
    : head_dim_(head_dim), max_position_(max_position) {
  TORCH_CHECK(head_dim % 2 == 0 && head_dim > 0, "RotaryEmbedding: head_dim must be even");
  TORCH_CHECK(max_position > 0, "RotaryEmbedding: max_position must be positive");
  // inv_freq[i] = theta^(-2i / d), computed as Hugging Face does (float32).
  at::Tensor exponent = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(head_dim);
  at::Tensor t = at::arange(max_position, at::kLong).to(at::kFloat);
  if (scaling.type == "longrope") {
    // Phi-3: inv_freq = 1 / (ext * theta^(2i/d)); ext = short factors for
    // positions below the original context, long ones from there on.
    const int64_t half = head_dim / 2;
    TORCH_CHECK(static_cast<int64_t>(scaling.short_factor.size()) == half &&
                    static_cast<int64_t>(scaling.long_factor.size()) == half,
                "RotaryEmbedding: longrope factors must have head_dim / 2 entries");
    at::Tensor base = at::pow(theta, exponent);
    at::Tensor short_inv = 1.0 / (at::tensor(scaling.short_factor, at::kDouble).to(at::kFloat) * base);
    at::Tensor long_inv = 1.0 / (at::tensor(scaling.long_factor, at::kDouble).to(at::kFloat) * base);
    inv_freq_ = short_inv;
    const int64_t split = std::min(max_position, scaling.original_max_position);
    at::Tensor freqs = at::cat(
        {at::outer(t.narrow(0, 0, split), short_inv), at::outer(t.narrow(0, split, max_position - split), long_inv)});
    const double attn = scaling.attention_factor;
    cos_ = (freqs.cos() * attn).contiguous();
    sin_ = (freqs.sin() * attn).contiguous();
    return;
  }
  const bool yarn = scaling.type == "yarn";
  inv_freq_ = yarn ? scale_yarn(at::pow(theta, exponent), head_dim, theta, scaling) : 1.0 / at::pow(theta, exponent);
  if (scaling.is_llama3()) inv_freq_ = scale_llama3(inv_freq_, scaling);
  if (scaling.type == "linear") inv_freq_ = inv_freq_ / scaling.factor;
  at::Tensor freqs = at::outer(t, inv_freq_);  // [max_position, head_dim / 2]
  // YaRN scales cos and sin; 1.0 elsewhere (a multiply by 1 changes no bit).
  const double attn = yarn ? scaling.attention_factor : 1.0;
  cos_ = (freqs.cos() * attn).contiguous();
  sin_ = (freqs.sin() * attn).contiguous();
}

void RotaryEmbedding::ensure_device_tables(const at::Tensor& x) const {
  if (!cos_device_.defined() || cos_device_.device() != x.device() || cos_device_.scalar_type() != x.scalar_type()) {
    cos_device_ = cos_.to(x.device(), x.scalar_type());
    sin_device_ = sin_.to(x.device(), x.scalar_type());
  }
}

void RotaryEmbedding::apply_qk_(at::Tensor& q, at::Tensor& k, const at::Tensor& positions) const {
  if (cuda_kernels_for(q) && cuda_kernels_for(k) && q.scalar_type() == k.scalar_type() && q.dim() == 3 &&
      k.dim() == 3 && q.is_contiguous() && k.is_contiguous() && q.size(0) == k.size(0) && q.size(2) >= head_dim_ &&
      k.size(2) >= head_dim_ && positions.scalar_type() == at::kLong && positions.device() == q.device() &&
      positions.is_contiguous()) {
    ensure_device_tables(q);
    cuda::rotary_qk_(q, k, positions, cos_device_, sin_device_, head_dim_);
    return;
  }
  apply_(q, positions);
  apply_(k, positions);
}

void RotaryEmbedding::apply_(at::Tensor& x, const at::Tensor& positions) const {
  TORCH_CHECK(x.dim() == 3 && x.size(2) >= head_dim_, "RotaryEmbedding: x must be [tokens, heads, >= ", head_dim_, "]");
  if (records_grad(x)) {
    x = rotary_recorded(*this, x, positions);  // a rotated copy in the graph, not an untracked in-place write
    return;
  }
  if (cpu_kernels_for(x) && x.is_contiguous()) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotary",
                                    [&] { rotate_cpu<scalar_t>(x, head_dim_, positions, cos_, sin_); });
    return;
  }
  // Device-generic path.
  const int64_t half = head_dim_ / 2;
  ensure_device_tables(x);
  at::Tensor c = cos_device_.index_select(0, positions).unsqueeze(1);  // [T, 1, half]
  at::Tensor s = sin_device_.index_select(0, positions).unsqueeze(1);
  at::Tensor x1 = x.narrow(2, 0, half).clone();
  at::Tensor x2 = x.narrow(2, half, half).clone();
  x.narrow(2, 0, half).copy_(x1 * c - x2 * s);
  x.narrow(2, half, half).copy_(x2 * c + x1 * s);
}

}  // namespace nnsight::kernels
