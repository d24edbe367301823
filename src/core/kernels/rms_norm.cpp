#include "core/kernels/rms_norm.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "core/kernels/kernel_gradients.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/undispatched.h"

namespace nnsight::kernels {

namespace {

template <typename scalar_t>
void rms_norm_cpu(const at::Tensor& x, const at::Tensor& w, double eps, at::Tensor& out) {
  const int64_t rows = x.size(0), n = x.size(1);
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const scalar_t* wp = w.data_ptr<scalar_t>();
  scalar_t* op = out.data_ptr<scalar_t>();
  kernels::parallel_for(0, rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const scalar_t* xr = xp + r * n;
      float ss = 0.f;
      for (int64_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(xr[i]);
        ss += v * v;
      }
      const float inv = 1.f / std::sqrt(ss / static_cast<float>(n) + static_cast<float>(eps));
      scalar_t* orow = op + r * n;
      for (int64_t i = 0; i < n; ++i) {
        const scalar_t normed = static_cast<scalar_t>(static_cast<float>(xr[i]) * inv);
        orow[i] = static_cast<scalar_t>(static_cast<float>(wp[i]) * static_cast<float>(normed));
      }
    }
  });
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (records_grad(x)) return rms_norm_recorded(x, weight, eps);
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 1 && x.size(1) == weight.size(0),
              "rms_norm: expected x [rows, hidden] and weight [hidden]");
  if (x.device().is_cpu() && x.scalar_type() == weight.scalar_type()) {
    at::Tensor xc = x.contiguous();
    at::Tensor out = new_output_like(xc);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, xc.scalar_type(), "rms_norm",
                                    [&] { rms_norm_cpu<scalar_t>(xc, weight.contiguous(), eps, out); });
    return out;
  }
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.dtype());
}

}  // namespace nnsight::kernels
