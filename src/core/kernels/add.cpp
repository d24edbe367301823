#include "core/kernels/add.h"

#include "core/kernels/kernel_gradients.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kernels/undispatched.h"
#include "core/kernels/kernel_path.h"

namespace nnsight::kernels {

at::Tensor add(const at::Tensor& a, const at::Tensor& b) {
  const bool own = cpu_kernels_for(a) && cpu_kernels_for(b) && a.scalar_type() == at::kFloat &&
                   b.scalar_type() == at::kFloat && a.is_contiguous() && b.is_contiguous() &&
                   a.sizes().equals(b.sizes()) && !records_grad(a) && !records_grad(b);
  if (!own) return a + b;
  at::Tensor out = new_output_like(a);
  const float* ap = a.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* op = out.data_ptr<float>();
  kernels::parallel_for(0, a.numel(), 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) op[i] = ap[i] + bp[i];
  });
  return out;
}

}  // namespace nnsight::kernels
