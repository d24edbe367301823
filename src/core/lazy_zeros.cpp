#include "core/lazy_zeros.h"

#include <sys/mman.h>

#include <ATen/ATen.h>

#include <limits>
#include <new>

namespace nnsight {

at::Tensor lazy_zeros(at::IntArrayRef sizes, const at::TensorOptions& options) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(c10::typeMetaToScalarType(options.dtype())));
  if (!options.device().is_cpu() || bytes < (int64_t(1) << 20)) return at::zeros(sizes, options);
  void* p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const size_t len = static_cast<size_t>(bytes);
  return at::from_blob(
      p, sizes, [len](void* q) { ::munmap(q, len); }, options);
}

at::Tensor nan_placeholder(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor one = at::full({1}, std::numeric_limits<float>::quiet_NaN(), options);
  std::vector<int64_t> strides(sizes.size(), 0);
  return one.as_strided(sizes, strides);
}

bool is_nan_placeholder(const at::Tensor& t) {
  if (!t.defined() || t.numel() <= 1) return false;
  for (int64_t s : t.strides())
    if (s != 0) return false;
  return true;
}

}  // namespace nnsight
