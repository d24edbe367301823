#include "tp/parallel_embedding.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "core/kernels/linear.h"

namespace nnsight::tp {

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t dim, ParallelContext ctx,
                                               const at::TensorOptions& options)
    : Module("Embedding"), vocab_(vocab), dim_(dim), ctx_(std::move(ctx)) {
  rows_ = even_split(vocab, ctx_, "vocabulary size");
  weight = register_parameter("weight", at::zeros({rows_.length, dim}, options), false);
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids) {
  return invoke(ids, [&](const at::Tensor& in) {
    if (ctx_.single()) return at::embedding(weight, in);
    // Ids owned by other ranks look up row 0 and are zeroed before the sum.
    at::Tensor local = in - rows_.start;
    at::Tensor outside = (local < 0).logical_or_(local >= rows_.length);
    at::Tensor y = at::embedding(weight, local.masked_fill(outside, 0));
    y.masked_fill_(outside.unsqueeze(-1), 0);
    ctx_.group->all_reduce_sum(y);
    return y;
  });
}

void VocabParallelEmbedding::load_weights(const WeightSource& source) {
  const std::string w = path() + ".weight";
  auto shape = source.shape(w);
  if (shape != std::vector<int64_t>{vocab_, dim_}) {
    throw LoadError(source.describe() + ": tensor '" + w + "' has an unexpected shape for vocabulary " +
                    std::to_string(vocab_) + " x hidden " + std::to_string(dim_));
  }
  weight.copy_(source.load(w, ShardSlice::rows(rows_.start, rows_.length)));
}

ParallelLMHead::ParallelLMHead(int64_t vocab, int64_t dim, ParallelContext ctx, const at::TensorOptions& options)
    : Module("Linear"), vocab_(vocab), dim_(dim), ctx_(std::move(ctx)) {
  rows_ = even_split(vocab, ctx_, "vocabulary size");
  weight = register_parameter("weight", at::zeros({rows_.length, dim}, options), false);
}

at::Tensor ParallelLMHead::forward(const at::Tensor& hidden) {
  return invoke(hidden, [&](const at::Tensor& in) {
    at::Tensor y = kernels::linear(in, weight, at::Tensor());  // [S, local_vocab]
    if (!ctx_.single()) y = ctx_.group->all_gather(y, -1);
    return y;
  });
}

void ParallelLMHead::tie_to(const VocabParallelEmbedding& embedding) {
  TORCH_CHECK(embedding.rows().start == rows_.start && embedding.rows().length == rows_.length,
              "ParallelLMHead::tie_to: embedding split differs");
  weight.set_(embedding.weight);
  tied_ = true;
}

void ParallelLMHead::load_weights(const WeightSource& source) {
  if (tied_) return;
  const std::string w = path() + ".weight";
  auto shape = source.shape(w);
  if (shape != std::vector<int64_t>{vocab_, dim_}) {
    throw LoadError(source.describe() + ": tensor '" + w + "' has an unexpected shape for vocabulary " +
                    std::to_string(vocab_) + " x hidden " + std::to_string(dim_));
  }
  weight.copy_(source.load(w, ShardSlice::rows(rows_.start, rows_.length)));
}

}  // namespace nnsight::tp
