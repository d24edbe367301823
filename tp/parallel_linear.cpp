#include "tp/parallel_linear.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "core/kernels/linear.h"

namespace nnsight::tp {

RowRange even_split(int64_t total, const ParallelContext& ctx, const std::string& what) {
  const int64_t w = ctx.world_size();
  if (total % w != 0) {
    throw ConfigError(what + " (" + std::to_string(total) + ") is not divisible by the tensor-parallel size (" +
                      std::to_string(w) + ")");
  }
  const int64_t n = total / w;
  return RowRange{n * ctx.rank(), n};
}

namespace {
void check_shape(const WeightSource& src, const std::string& name, const std::vector<int64_t>& expect) {
  auto got = src.shape(name);
  if (got != expect) {
    std::string g, e;
    for (auto v : got) g += (g.empty() ? "" : ", ") + std::to_string(v);
    for (auto v : expect) e += (e.empty() ? "" : ", ") + std::to_string(v);
    throw LoadError(src.describe() + ": tensor '" + name + "' has shape [" + g + "], expected [" + e + "]");
  }
}
}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features, bool has_bias,
                                           ParallelContext ctx, std::vector<RowRange> rows,
                                           bool gather_output, const at::TensorOptions& options)
    : Module("Linear"), in_(in_features), out_(out_features), ctx_(std::move(ctx)),
      rows_(std::move(rows)), gather_output_(gather_output) {
  int64_t local = 0;
  for (const auto& r : rows_) {
    TORCH_CHECK(r.start >= 0 && r.length > 0 && r.start + r.length <= out_, "ColumnParallelLinear: bad row range");
    local += r.length;
  }
  weight = register_parameter("weight", at::zeros({local, in_}, options), /*requires_grad=*/false);
  if (has_bias) bias = register_parameter("bias", at::zeros({local}, options), false);
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) {
    at::Tensor y = kernels::linear(in, weight, bias);  // [T, local_out]
    if (gather_output_ && !ctx_.single()) y = ctx_.group->all_gather(y, -1);
    return y;
  });
}

void ColumnParallelLinear::load_weights(const WeightSource& source) {
  const std::string w = path() + ".weight";
  check_shape(source, w, {out_, in_});
  std::vector<at::Tensor> parts;
  for (const auto& r : rows_) parts.push_back(source.load(w, ShardSlice::rows(r.start, r.length)));
  weight.copy_(parts.size() == 1 ? parts[0] : at::cat(parts, 0));
  if (bias.defined()) {
    const std::string b = path() + ".bias";
    check_shape(source, b, {out_});
    std::vector<at::Tensor> bparts;
    for (const auto& r : rows_) bparts.push_back(source.load(b, ShardSlice::rows(r.start, r.length)));
    bias.copy_(bparts.size() == 1 ? bparts[0] : at::cat(bparts, 0));
  }
}

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features, bool has_bias,
                                     ParallelContext ctx, RowRange cols, const at::TensorOptions& options)
    : Module("Linear"), in_(in_features), out_(out_features), ctx_(std::move(ctx)), cols_(cols) {
  TORCH_CHECK(cols_.start >= 0 && cols_.length > 0 && cols_.start + cols_.length <= in_,
              "RowParallelLinear: bad column range");
  weight = register_parameter("weight", at::zeros({out_, cols_.length}, options), false);
  if (has_bias) bias = register_parameter("bias", at::zeros({out_}, options), false);
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) {
    if (ctx_.single()) return kernels::linear(in, weight, bias);
    at::Tensor y = kernels::linear(in, weight, at::Tensor());  // [T, out], partial sum over this rank's columns
    ctx_.group->all_reduce_sum(y);
    if (bias.defined()) y.add_(bias);
    return y;
  });
}

void RowParallelLinear::load_weights(const WeightSource& source) {
  const std::string w = path() + ".weight";
  check_shape(source, w, {out_, in_});
  weight.copy_(source.load(w, cols_.length == in_ ? ShardSlice::whole() : ShardSlice::cols(cols_.start, cols_.length)));
  if (bias.defined()) {
    const std::string b = path() + ".bias";
    check_shape(source, b, {out_});
    bias.copy_(source.load(b));
  }
}

}  // namespace nnsight::tp
