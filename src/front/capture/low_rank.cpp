#include "front/capture/low_rank.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace nnsight::capture {

LowRank truncated_svd(const at::Tensor& x, int64_t k) {
  TORCH_CHECK(x.dim() == 2, "truncated_svd: expected a 2-d block");
  const at::Tensor xf = x.to(at::kFloat);
  const int64_t r = std::min({k, xf.size(0), xf.size(1)});
  auto usv = at::linalg_svd(xf, /*full_matrices=*/false);
  const at::Tensor& u = std::get<0>(usv);   // [n, m]
  const at::Tensor& s = std::get<1>(usv);   // [m]
  const at::Tensor& vh = std::get<2>(usv);  // [m, hidden]
  LowRank out;
  out.coefficients = (u.narrow(1, 0, r) * s.narrow(0, 0, r)).contiguous();
  out.basis = vh.narrow(0, 0, r).contiguous();
  return out;
}

}  // namespace nnsight::capture
