#include "core/gguf/qk_permutation.h"

#include <ATen/ATen.h>

#include <vector>

namespace nnsight {

at::Tensor unpermute_qk_rows(const at::Tensor& gguf_rows, int64_t num_heads) {
  TORCH_CHECK(num_heads > 0 && gguf_rows.dim() >= 1 && gguf_rows.size(0) % num_heads == 0,
              "unpermute_qk_rows: ", gguf_rows.size(0), " rows do not split into ", num_heads, " heads");
  const int64_t head_dim = gguf_rows.size(0) / num_heads;
  TORCH_CHECK(head_dim % 2 == 0, "unpermute_qk_rows: odd head_dim ", head_dim);
  // [num_heads, head_dim / 2, 2, rest...] -> [num_heads, 2, head_dim / 2, rest...]
  std::vector<int64_t> split = {num_heads, head_dim / 2, 2};
  for (int64_t d = 1; d < gguf_rows.dim(); ++d) split.push_back(gguf_rows.size(d));
  return gguf_rows.reshape(split).transpose(1, 2).contiguous().view(gguf_rows.sizes());
}

}  // namespace nnsight
