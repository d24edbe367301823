#include "tp/sharding.h"

#include <ATen/ATen.h>

namespace nnsight::tp {

LastDimSharding::LastDimSharding(ParallelContext ctx, ShardLayout layout)
    : ctx_(std::move(ctx)), layout_(std::move(layout)) {
  TORCH_CHECK(layout_.world_size() == ctx_.world_size(), "LastDimSharding: layout for ", layout_.world_size(),
              " ranks in a group of ", ctx_.world_size());
}

at::Tensor LastDimSharding::gather(const at::Tensor& local) const {
  const int64_t last = local.dim() - 1;
  TORCH_CHECK(local.dim() >= 1 && local.size(last) == layout_.local_size(), "LastDimSharding: local part has ",
              local.dim() >= 1 ? local.size(last) : 0, " positions in its last dimension, the layout ",
              layout_.local_size());
  at::Tensor all = ctx_.group->all_gather(local.contiguous(), last);  // [..., world * local]
  if (layout_.concatenation_is_whole()) return all;
  std::vector<at::Tensor> parts;
  parts.reserve(layout_.assembly().size());
  for (const auto& run : layout_.assembly()) parts.push_back(all.narrow(last, run.source, run.length));
  return at::cat(parts, last);
}

at::Tensor LastDimSharding::reshard(const at::Tensor& whole) const {
  const int64_t last = whole.dim() - 1;
  TORCH_CHECK(whole.dim() >= 1 && whole.size(last) == layout_.whole(), "LastDimSharding: whole tensor has ",
              whole.dim() >= 1 ? whole.size(last) : 0, " positions in its last dimension, expected ", layout_.whole());
  const auto& ranges = layout_.ranges(ctx_.rank());
  if (ranges.size() == 1) return whole.narrow(last, ranges[0].start, ranges[0].length).contiguous();
  std::vector<at::Tensor> parts;
  for (const auto& r : ranges) parts.push_back(whole.narrow(last, r.start, r.length));
  return at::cat(parts, last);
}

std::string LastDimSharding::describe() const {
  return "split on the last dimension over " + std::to_string(ctx_.world_size()) + " ranks (" +
         std::to_string(layout_.local_size()) + " of " + std::to_string(layout_.whole()) + " per rank)";
}

PartialSumSharding::PartialSumSharding(ParallelContext ctx) : ctx_(std::move(ctx)) {}

at::Tensor PartialSumSharding::gather(const at::Tensor& local) const {
  at::Tensor whole = local.clone(at::MemoryFormat::Contiguous);
  ctx_.group->all_reduce_sum(whole);
  return whole;
}

at::Tensor PartialSumSharding::reshard(const at::Tensor& whole) const {
  return whole / static_cast<double>(ctx_.world_size());
}

std::string PartialSumSharding::describe() const {
  return "partial sum over " + std::to_string(ctx_.world_size()) + " ranks";
}

std::shared_ptr<const TensorSharding> last_dim_sharding(const ParallelContext& ctx, const ShardLayout& layout) {
  if (ctx.single()) return nullptr;
  return std::make_shared<LastDimSharding>(ctx, layout);
}

}  // namespace nnsight::tp
