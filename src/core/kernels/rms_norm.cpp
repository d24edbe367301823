#include "core/kernels/rms_norm.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "core/kernels/add.h"
#include "core/kernels/cuda_kernels.h"
#include "core/kernels/kernel_gradients.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/undispatched.h"
#include "core/kernels/kernel_path.h"

namespace nnsight::kernels {

namespace {

// Lanes of the sum of squares: element i goes to lane i % kLanes, the lanes
// are then added pairwise. One running sum took 576 dependent additions per
// row, about 0.5 us of a decode step's 1 us norm at SmolLM2's width; the
// order depends on the row's length only, so a row's numbers do not depend on
// the batch it is in (and need no particular vector width).
constexpr int64_t kLanes = 16;

template <typename scalar_t>
float sum_of_squares(const scalar_t* x, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const float v = static_cast<float>(x[i + l]);
      lane[l] += v * v;
    }
  }
  for (int64_t l = 0; i < n; ++i, ++l) {
    const float v = static_cast<float>(x[i]);
    lane[l] += v * v;
  }
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

// One row of n: out = w * (x / sqrt(mean(x^2) + eps)).
template <typename scalar_t>
void rms_norm_row(const scalar_t* x, const scalar_t* w, float eps, int64_t n, scalar_t* out) {
  const float ss = sum_of_squares(x, n);
  const float inv = 1.f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    const scalar_t normed = static_cast<scalar_t>(static_cast<float>(x[i]) * inv);
    out[i] = static_cast<scalar_t>(static_cast<float>(w[i]) * static_cast<float>(normed));
  }
}

template <typename scalar_t>
void rms_norm_cpu(const at::Tensor& x, const at::Tensor& w, double eps, at::Tensor& out) {
  const int64_t rows = x.size(0), n = x.size(1);
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const scalar_t* wp = w.data_ptr<scalar_t>();
  scalar_t* op = out.data_ptr<scalar_t>();
  kernels::parallel_for(0, rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rms_norm_row(xp + r * n, wp, static_cast<float>(eps), n, op + r * n);
  });
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (records_grad(x)) return rms_norm_recorded(x, weight, eps);
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 1 && x.size(1) == weight.size(0),
              "rms_norm: expected x [rows, hidden] and weight [hidden]");
  if (cpu_kernels_for(x) && x.scalar_type() == weight.scalar_type()) {
    at::Tensor xc = x.contiguous();
    at::Tensor out = new_output_like(xc);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, xc.scalar_type(), "rms_norm",
                                    [&] { rms_norm_cpu<scalar_t>(xc, weight.contiguous(), eps, out); });
    return out;
  }
  if (cuda_kernels_for(x) && cuda_kernels_for(weight) && x.is_contiguous() && weight.is_contiguous() &&
      x.scalar_type() == weight.scalar_type())
    return cuda::rms_norm(x, weight, eps);
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.dtype());
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& weight,
                                               double eps) {
  const auto own = [](const at::Tensor& t) {
    return cpu_kernels_for(t) && t.scalar_type() == at::kFloat && t.is_contiguous() && !records_grad(t);
  };
  if (!(own(a) && own(b) && own(weight) && a.dim() == 2 && a.sizes().equals(b.sizes()) && weight.dim() == 1 &&
        weight.size(0) == a.size(1))) {
    const auto fused_on_cuda = [&](const at::Tensor& t) {
      return cuda_kernels_for(t) && t.is_contiguous() && t.scalar_type() == a.scalar_type();
    };
    if (fused_on_cuda(a) && fused_on_cuda(b) && fused_on_cuda(weight) && a.dim() == 2 && a.sizes().equals(b.sizes()) &&
        weight.dim() == 1 && weight.size(0) == a.size(1))
      return cuda::add_rms_norm(a, b, weight, eps);
    at::Tensor sum = kernels::add(a, b);
    at::Tensor normed = rms_norm(sum, weight, eps);
    return {std::move(sum), std::move(normed)};
  }
  at::Tensor sum = new_output_like(a);
  at::Tensor out = new_output_like(a);
  const int64_t rows = a.size(0), n = a.size(1);
  const float* ap = a.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* sp = sum.data_ptr<float>();
  float* op = out.data_ptr<float>();
  kernels::parallel_for(0, rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* sr = sp + r * n;
      for (int64_t i = 0; i < n; ++i) sr[i] = ap[r * n + i] + bp[r * n + i];
      rms_norm_row(sr, wp, static_cast<float>(eps), n, op + r * n);
    }
  });
  return {std::move(sum), std::move(out)};
}

}  // namespace nnsight::kernels
