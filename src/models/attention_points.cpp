#include "models/attention_points.h"

#include <ATen/ATen.h>

#include "core/kernels/eager_attention.h"
#include "models/head_split_sharding.h"
#include "tp/sharding.h"

namespace nnsight {

namespace {

// [heads, query, key] split by heads (dim 0): through a [query, key, heads] view.
class LeadingHeadsSharding final : public TensorSharding {
 public:
  explicit LeadingHeadsSharding(std::shared_ptr<const TensorSharding> heads) : heads_(std::move(heads)) {}
  at::Tensor gather(const at::Tensor& local) const override {
    return heads_->gather(local.permute({1, 2, 0}).contiguous()).permute({2, 0, 1}).contiguous();
  }
  at::Tensor reshard(const at::Tensor& whole) const override {
    return heads_->reshard(whole.permute({1, 2, 0}).contiguous()).permute({2, 0, 1}).contiguous();
  }
  std::string describe() const override { return heads_->describe() + " (leading heads)"; }

 private:
  std::shared_ptr<const TensorSharding> heads_;
};

void shard(HookPoint& p, std::shared_ptr<const TensorSharding> s) {
  p.set_input_sharding(s);
  p.set_output_sharding(std::move(s));
}

}  // namespace

AttentionPoints::AttentionPoints(Module& owner, const tp::ParallelContext& ctx, const tp::ShardLayout& heads,
                                 const tp::ShardLayout& kv_heads, int64_t head_dim) {
  q = owner.register_module("q", std::make_shared<HookPoint>());
  k = owner.register_module("k", std::make_shared<HookPoint>());
  v = owner.register_module("v", std::make_shared<HookPoint>());
  scores = owner.register_module("scores", std::make_shared<HookPoint>(/*per_sequence=*/true));
  pattern = owner.register_module("pattern", std::make_shared<HookPoint>(/*per_sequence=*/true));
  z = owner.register_module("z", std::make_shared<HookPoint>());
  if (ctx.single()) return;
  auto by_heads = std::make_shared<HeadSplitSharding>(tp::last_dim_sharding(ctx, heads.scaled(head_dim)), head_dim);
  auto by_kv = std::make_shared<HeadSplitSharding>(tp::last_dim_sharding(ctx, kv_heads.scaled(head_dim)), head_dim);
  auto leading = std::make_shared<LeadingHeadsSharding>(tp::last_dim_sharding(ctx, heads));
  shard(*q, by_heads);
  shard(*z, by_heads);
  shard(*k, by_kv);
  shard(*v, by_kv);
  shard(*scores, leading);
  shard(*pattern, leading);
}

at::Tensor AttentionPoints::attend(at::Tensor qt, at::Tensor kt, at::Tensor vt, KVCache& cache,
                                   const batching::BatchMeta& meta, double scale,
                                   const kernels::AttentionOptions& options) {
  // A hook's replacement must keep the shape the kernels index by.
  auto through = [](HookPoint& p, const at::Tensor& x) {
    if (!p.has_hooks()) return x;
    at::Tensor y = p.forward(x);
    TORCH_CHECK(y.sizes() == x.sizes(), "attention point '", p.path(), "': a hook returned shape ", y.sizes(), " for ",
                x.sizes());
    return y.to(x.dtype()).contiguous();
  };
  qt = through(*q, qt);
  kt = through(*k, kt);
  vt = through(*v, vt);
  at::Tensor o = kernels::attend(qt, kt, vt, cache, meta, scale, options);  // [T, heads, d]
  if (scores->has_hooks() || pattern->has_hooks()) {
    for (int64_t s = 0; s < meta.num_seqs; ++s) {
      const int64_t start = meta.query_start_host[s], n = meta.query_len(s);
      if (n == 0 || !(scores->watched(start) || pattern->watched(start))) continue;
      const kernels::SequenceKV kv = kernels::sequence_kv(cache, meta, s);
      at::Tensor sc = kernels::sequence_scores(qt, kv, meta, s, scale, options);  // [heads, n, context]
      if (scores->has_hooks()) sc = scores->forward_sequence(sc, start);
      at::Tensor p = at::softmax(sc.to(at::kFloat), -1);
      if (pattern->has_hooks()) p = pattern->forward_sequence(p, start);
      o.narrow(0, start, n).copy_(kernels::sequence_output(p, kv, o.scalar_type()));
    }
  }
  return through(*z, o);
}

}  // namespace nnsight
