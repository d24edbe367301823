// Embedding and LM head split over the vocabulary across tensor-parallel
// ranks. Each rank holds vocabulary rows [start, start + local); the
// embedding zeroes ids outside its range and all-reduces, the head computes
// its slice of the logits and all-gathers them.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "core/module.h"
#include "tp/parallel_linear.h"
#include "tp/process_group.h"

namespace nnsight::tp {

class VocabParallelEmbedding : public Module {
 public:
  // output_scale != 0 multiplies the looked-up rows by it (rounded to the
  // activation dtype) inside the module, as Gemma 3's scaled embedding does,
  // so hooks see the scaled rows; type_name is the module's class name.
  VocabParallelEmbedding(int64_t vocab, int64_t dim, ParallelContext ctx, const at::TensorOptions& options,
                         double output_scale = 0.0, std::string type_name = "Embedding");

  at::Tensor forward(const at::Tensor& ids);  // [T] int64 -> [T, dim]
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }
  void load_weights(const WeightSource& source) override;

  int64_t vocab() const { return vocab_; }
  RowRange rows() const { return rows_; }
  // The packed table ([local_vocab, dim]; rows read and decoded per token),
  // or nullptr when `weight` holds it (see parallel_linear.h).
  const kernels::PackedMatrix* packed_weight() const { return packed_.get(); }
  at::Tensor dense_weight() const;
  at::Tensor weight;  // [local_vocab, dim]

 private:
  int64_t vocab_, dim_;
  double output_scale_ = 0.0;
  ParallelContext ctx_;
  RowRange rows_;
  std::shared_ptr<const kernels::PackedMatrix> packed_;
};

class ParallelLMHead : public Module {
 public:
  ParallelLMHead(int64_t vocab, int64_t dim, ParallelContext ctx, const at::TensorOptions& options);

  // [S, dim] -> [S, vocab] on every rank.
  at::Tensor forward(const at::Tensor& hidden);
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return forward(x); }
  void load_weights(const WeightSource& source) override;
  // Shares the embedding's weight (tied word embeddings); loading is then skipped.
  void tie_to(const VocabParallelEmbedding& embedding);
  bool tied() const { return tied_; }
  // The packed weight (the embedding's when tied), or nullptr.
  const kernels::PackedMatrix* packed_weight() const;
  at::Tensor dense_weight() const;

  at::Tensor weight;  // [local_vocab, dim]

 private:
  int64_t vocab_, dim_;
  ParallelContext ctx_;
  RowRange rows_;
  bool tied_ = false;
  const VocabParallelEmbedding* tied_to_ = nullptr;  // the module owning both (the model) keeps it alive
  std::shared_ptr<const kernels::PackedMatrix> packed_;
};

}  // namespace nnsight::tp
