// HookPoint: a named point inside a module's computation (TransformerLens's
// HookPoint): an identity module whose output is a value the surrounding
// module computes anyway or can compute on request -- an attention's rotated
// q and k, its scores and pattern, each head's output, a block's residual
// between attention and MLP. Being a Module it has a Hugging Face-style path
// ("model.layers.3.self_attn.pattern", an attached SAE's
// "sae.hook_sae_acts_post"), hooks, a provider key
// ("...pattern.output"), and every tracing feature of module values (reads,
// writes, steps, t.cache) without any of its own.
//
// "Ask, then compute" (llama.cpp's evaluation callback): a point whose value
// costs work the fused path never does (the attention pattern) is computed
// only where it is watched. watched(token_start) asks whoever hooked the
// point -- the interleaver installs a WatchQuery answering "does a live
// trace of the request whose rows start there want this key?"; a hook with
// no query (forward-hook configs, tests) watches every sequence.
//
// A per-sequence point (pattern, scores: [heads, query, key], whose key
// dimension differs between sequences) is called once per watched sequence
// of the step and publishes that sequence's first token row
// (sequence_start()); its values have row level kSequence.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/module.h"

namespace nnsight {

class HookPoint : public Module {
 public:
  using WatchQuery = std::function<bool(int64_t token_start)>;

  explicit HookPoint(bool per_sequence = false) : Module("HookPoint"), per_sequence_(per_sequence) {}

  // Identity with this point's hooks around it (a hook may replace x).
  at::Tensor forward(const at::Tensor& x) {
    return invoke(x, [](const at::Tensor& v) { return v; });
  }
  // The same for one sequence's value of a per-sequence point.
  at::Tensor forward_sequence(const at::Tensor& x, int64_t token_start);
  // Called inside a trace (an attached module's point, lm.envoy(path)(x)): the identity.
  bool callable() const override { return true; }
  at::Tensor call(const at::Tensor& x) override { return x; }

  // Whether the value is wanted for the sequence whose rows start at
  // `token_start` (any, for token-level points: pass -1).
  bool watched(int64_t token_start = -1) const {
    return has_hooks() && (!query_ || token_start < 0 || query_(token_start));
  }
  void set_watch_query(WatchQuery q) { query_ = std::move(q); }
  void clear_watch_query() { query_ = nullptr; }

  bool per_sequence() const { return per_sequence_; }
  // The first token row of the sequence the current call belongs to (-1
  // outside a per-sequence call).
  int64_t sequence_start() const { return sequence_start_; }

 private:
  bool per_sequence_;
  int64_t sequence_start_ = -1;
  WatchQuery query_;
};

}  // namespace nnsight
