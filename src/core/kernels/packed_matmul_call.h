// What every packed matmul does around its tiles, shared by the float32
// kernel (packed_linear) and the 8-bit-activation one (packed_linear_q8):
// check x and the bias, bring x to a float32 [M, K] matrix, make the output,
// handle the empty cases, and give the result x's dtype and leading shape.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/kernels/packed_matrix.h"
#include "core/kernels/undispatched.h"

namespace nnsight::kernels::detail {

// `rows(x, w, bias_or_null, out, M)` fills out [M, N] from x [M, K] (both
// float32, contiguous); called only when M, N and K are all positive.
template <class Rows>
at::Tensor packed_matmul(const char* who, const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias,
                         Rows&& rows) {
  TORCH_CHECK(x.defined() && x.device().is_cpu() && x.layout() == at::kStrided, who, ": x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, who,
              ": x must be float32 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == w.cols, who, ": x's last dimension ", x.size(-1),
              " differs from the weight's ", w.cols, " columns");
  const int64_t K = w.cols, N = w.rows;
  const int64_t M = K == 0 ? 0 : x.numel() / K;
  // A float32 contiguous [M, K] x (every decode step's) is used as it is:
  // each reshape / to / contiguous / view is a LibTorch call of about a
  // microsecond, and a decode step makes 210 of these calls.
  const bool as_is = x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous();
  at::Tensor x2 = as_is ? x : x.reshape({M, K}).to(at::kFloat).contiguous();  // [M, K]
  at::Tensor b;
  if (bias.defined()) {
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == N, who, ": bias of shape ", bias.sizes(), " for ", N, " outputs");
    b = bias.to(at::kFloat).contiguous();  // [N]
  }
  at::Tensor out = new_output({M, N}, x2.options());  // [M, N]
  if (M > 0 && N > 0) {
    if (K == 0) {
      out.zero_();
      if (b.defined()) out.add_(b);
    } else {
      rows(x2.data_ptr<float>(), w, b.defined() ? b.data_ptr<float>() : nullptr, out.data_ptr<float>(), M);
    }
  }
  if (x.scalar_type() != at::kFloat) out = out.to(x.scalar_type());
  if (x.dim() == 2) return out;
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = N;
  return out.view(sizes);
}

}  // namespace nnsight::kernels::detail
