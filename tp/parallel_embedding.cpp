#include "tp/parallel_embedding.h"

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "core/kernels/linear.h"
#include "core/kernels/int8_rows.h"
#include "core/kernels/packed_linear.h"
#include "core/gradient_forward.h"
#include "core/lazy_zeros.h"

namespace nnsight::tp {

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t dim, ParallelContext ctx,
                                               const at::TensorOptions& options, double output_scale,
                                               std::string type_name)
    : Module(std::move(type_name)), vocab_(vocab), dim_(dim), output_scale_(output_scale), ctx_(std::move(ctx)) {
  rows_ = even_split(vocab, ctx_, "vocabulary size");
  weight = register_parameter("weight", lazy_zeros({rows_.length, dim}, options), false);
}

at::Tensor VocabParallelEmbedding::dense_weight() const {
  return packed_ ? packed_->dequantize().to(weight.options()) : weight;
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids) {
  return invoke(ids, [&](const at::Tensor& in) {
    auto lookup = [&](const at::Tensor& ids) {
      return packed_ ? kernels::packed_embedding(*packed_, ids, weight.scalar_type()) : at::embedding(weight, ids);
    };
    auto scaled = [&](at::Tensor y) {
      // Rounded to the dtype on the host (no device synchronization).
      return output_scale_ == 0.0 ? y : y * at::scalar_tensor(output_scale_, y.options().device(at::kCPU)).item();
    };
    // A gradient forward: these rows are the leaf every gradient flows back to.
    auto leaf = [](at::Tensor y) { return GradientForward::active() ? y.requires_grad_(true) : y; };
    if (ctx_.single()) return leaf(scaled(lookup(in)));
    // Ids owned by other ranks look up row 0 and are zeroed before the sum.
    at::Tensor local = in - rows_.start;
    at::Tensor outside = (local < 0).logical_or_(local >= rows_.length);
    at::Tensor y = lookup(local.masked_fill(outside, 0));
    y.masked_fill_(outside.unsqueeze(-1), 0);
    ctx_.group->all_reduce_sum(y);
    return leaf(scaled(y));
  });
}

void VocabParallelEmbedding::load_weights(const WeightSource& source) {
  const std::string w = path() + ".weight";
  auto shape = source.shape(w);
  if (shape != std::vector<int64_t>{vocab_, dim_}) {
    throw LoadError(source.describe() + ": tensor '" + w + "' has an unexpected shape for vocabulary " +
                    std::to_string(vocab_) + " x hidden " + std::to_string(dim_));
  }
  const ShardSlice slice = ShardSlice::rows(rows_.start, rows_.length);
  std::optional<kernels::PackedMatrix> p = weight.device().is_cpu() ? source.load_packed(w, slice) : std::nullopt;
  if (p) {
    packed_ = std::make_shared<const kernels::PackedMatrix>(std::move(*p));
    release_to_placeholder(weight);
  } else {
    weight.copy_(source.load(w, slice));
  }
}

ParallelLMHead::ParallelLMHead(int64_t vocab, int64_t dim, ParallelContext ctx, const at::TensorOptions& options)
    : Module("Linear"), vocab_(vocab), dim_(dim), ctx_(std::move(ctx)) {
  rows_ = even_split(vocab, ctx_, "vocabulary size");
  weight = register_parameter("weight", lazy_zeros({rows_.length, dim}, options), false);
}

const kernels::PackedMatrix* ParallelLMHead::packed_weight() const {
  return tied_to_ != nullptr ? tied_to_->packed_weight() : packed_.get();
}

at::Tensor ParallelLMHead::dense_weight() const {
  const kernels::PackedMatrix* p = packed_weight();
  return p != nullptr ? p->dequantize().to(weight.options()) : weight;
}

at::Tensor ParallelLMHead::forward(const at::Tensor& hidden) {
  return invoke(hidden, [&](const at::Tensor& in) {
    const kernels::PackedMatrix* p = packed_weight();
    at::Tensor y = p != nullptr ? kernels::packed_linear_rows(in, *p, at::Tensor())  // [S, local_vocab]
                                : kernels::linear(in, weight, at::Tensor());
    if (!ctx_.single()) y = ctx_.group->all_gather(y, -1);
    return y;
  });
}

void ParallelLMHead::tie_to(const VocabParallelEmbedding& embedding) {
  TORCH_CHECK(embedding.rows().start == rows_.start && embedding.rows().length == rows_.length,
              "ParallelLMHead::tie_to: embedding split differs");
  weight.set_(embedding.weight);
  tied_ = true;
  tied_to_ = &embedding;
}

void ParallelLMHead::load_weights(const WeightSource& source) {
  if (tied_) {
    // The embedding (loaded first) went packed: drop the shared float storage too.
    if (packed_weight() != nullptr && !is_nan_placeholder(weight)) release_to_placeholder(weight);
    return;
  }
  const std::string w = path() + ".weight";
  auto shape = source.shape(w);
  if (shape != std::vector<int64_t>{vocab_, dim_}) {
    throw LoadError(source.describe() + ": tensor '" + w + "' has an unexpected shape for vocabulary " +
                    std::to_string(vocab_) + " x hidden " + std::to_string(dim_));
  }
  const ShardSlice slice = ShardSlice::rows(rows_.start, rows_.length);
  std::optional<kernels::PackedMatrix> p = weight.device().is_cpu() ? source.load_packed(w, slice) : std::nullopt;
  if (p) {
    packed_ = std::make_shared<const kernels::PackedMatrix>(std::move(*p));
    release_to_placeholder(weight);
  } else {
    weight.copy_(source.load(w, slice));
  }
}

}  // namespace nnsight::tp
