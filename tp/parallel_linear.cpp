#include "tp/parallel_linear.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "core/kernels/linear.h"
#include "core/kernels/int8_rows.h"
#include "core/kernels/packed_linear.h"
#include "core/lazy_zeros.h"
#include "tp/sharding.h"

namespace nnsight::tp {

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

void release_to_placeholder(at::Tensor& param) {
  at::Tensor ph = nan_placeholder(param.sizes(), param.options());
  param.set_(ph.storage(), ph.storage_offset(), ph.sizes(), ph.strides());
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, bool has_bias, ParallelContext ctx, ShardLayout layout,
                                           bool gather_output, const at::TensorOptions& options)
    : Module("Linear"),
      in_(in_features),
      ctx_(std::move(ctx)),
      layout_(std::move(layout)),
      gather_output_(gather_output) {
  TORCH_CHECK(layout_.world_size() == ctx_.world_size(), "ColumnParallelLinear: layout for ", layout_.world_size(),
              " ranks in a group of ", ctx_.world_size());
  const int64_t local = layout_.local_size();
  weight = register_parameter("weight", lazy_zeros({local, in_}, options), /*requires_grad=*/false);
  if (has_bias) bias = register_parameter("bias", at::zeros({local}, options), false);
  split_ = last_dim_sharding(ctx_, layout_);
  if (!gather_output_) set_output_sharding(split_);
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) {
    at::Tensor y = packed_ ? kernels::packed_linear_rows(in, *packed_, bias)  // [T, local_out]
                           : kernels::linear(in, weight, bias);
    if (gather_output_ && split_) y = split_->gather(y);  // [T, out]
    return y;
  });
}

void ColumnParallelLinear::load_weights(const WeightSource& source) {
  const std::string w = path() + ".weight";
  check_shape(source, w, {out_features(), in_});
  std::optional<kernels::PackedMatrix> whole = weight.device().is_cpu() ? source.load_packed(w) : std::nullopt;
  if (whole) {
    std::vector<int64_t> index;
    for (const auto& r : rows())
      for (int64_t i = 0; i < r.length; ++i) index.push_back(r.start + i);
    packed_ = std::make_shared<const kernels::PackedMatrix>(
        rows().size() == 1 ? whole->narrow_rows(rows()[0].start, rows()[0].length) : whole->select_rows(index));
    release_to_placeholder(weight);
  }
  std::vector<at::Tensor> parts;
  if (!packed_) {
    for (const auto& r : rows()) parts.push_back(source.load(w, ShardSlice::rows(r.start, r.length)));
    weight.copy_(parts.size() == 1 ? parts[0] : at::cat(parts, 0));
  }
  if (bias.defined()) {
    const std::string b = path() + ".bias";
    check_shape(source, b, {out_features()});
    std::vector<at::Tensor> bparts;
    for (const auto& r : rows()) bparts.push_back(source.load(b, ShardSlice::rows(r.start, r.length)));
    bias.copy_(bparts.size() == 1 ? bparts[0] : at::cat(bparts, 0));
  }
}

RowParallelLinear::RowParallelLinear(int64_t out_features, bool has_bias, ParallelContext ctx, ShardLayout layout,
                                     const at::TensorOptions& options)
    : Module("Linear"), out_(out_features), ctx_(std::move(ctx)), layout_(std::move(layout)) {
  TORCH_CHECK(layout_.world_size() == ctx_.world_size(), "RowParallelLinear: layout for ", layout_.world_size(),
              " ranks in a group of ", ctx_.world_size());
  TORCH_CHECK(layout_.ranges(ctx_.rank()).size() == 1, "RowParallelLinear: one column range per rank");
  weight = register_parameter("weight", lazy_zeros({out_, layout_.local_size()}, options), false);
  if (has_bias) bias = register_parameter("bias", at::zeros({out_}, options), false);
  set_input_sharding(last_dim_sharding(ctx_, layout_));
}

RowRange RowParallelLinear::cols() const { return layout_.ranges(ctx_.rank()).front(); }

at::Tensor ColumnParallelLinear::dense_weight() const {
  return packed_ ? packed_->dequantize().to(weight.options()) : weight;
}

at::Tensor RowParallelLinear::dense_weight() const {
  return packed_ ? packed_->dequantize().to(weight.options()) : weight;
}

std::vector<at::Tensor> forward_together(const at::Tensor& x, const std::vector<ColumnParallelLinear*>& layers) {
  bool together = true;
  for (const ColumnParallelLinear* l : layers)
    together = together && l->packed_weight() != nullptr && !l->has_hooks() && !l->gathers_output();
  if (together) {
    std::vector<const kernels::PackedMatrix*> ws;
    std::vector<at::Tensor> biases;
    for (const ColumnParallelLinear* l : layers) {
      ws.push_back(l->packed_weight());
      biases.push_back(l->bias);
    }
    return kernels::packed_linear_many_rows(x, ws, biases);
  }
  std::vector<at::Tensor> outs;
  outs.reserve(layers.size());
  for (ColumnParallelLinear* l : layers) outs.push_back(l->forward(x));
  return outs;
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) {
  return invoke(x, [&](const at::Tensor& in) {
    if (ctx_.single())
      return packed_ ? kernels::packed_linear_rows(in, *packed_, bias) : kernels::linear(in, weight, bias);
    // [T, out], partial sum over this rank's columns
    at::Tensor y =
        packed_ ? kernels::packed_linear_rows(in, *packed_, at::Tensor()) : kernels::linear(in, weight, at::Tensor());
    ctx_.group->all_reduce_sum(y);
    if (bias.defined()) y.add_(bias);
    return y;
  });
}

void RowParallelLinear::load_weights(const WeightSource& source) {
  const std::string w = path() + ".weight";
  const RowRange c = cols();
  check_shape(source, w, {out_, in_features()});
  const ShardSlice slice = c.length == in_features() ? ShardSlice::whole() : ShardSlice::cols(c.start, c.length);
  std::optional<kernels::PackedMatrix> p = weight.device().is_cpu() ? source.load_packed(w, slice) : std::nullopt;
  if (p) {
    packed_ = std::make_shared<const kernels::PackedMatrix>(std::move(*p));
    release_to_placeholder(weight);
  } else {
    weight.copy_(source.load(w, slice));
  }
  if (bias.defined()) {
    const std::string b = path() + ".bias";
    check_shape(source, b, {out_});
    bias.copy_(source.load(b));
  }
}

}  // namespace nnsight::tp
