// The models on flat token batches through the paged KV cache equal a dense
// per-sequence reference forward, for batches that mix prompts of different
// lengths, chunked prefill and decode steps.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "batching/flattener.h"
#include "support/seq_slots.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"
#include "models/causal_lm.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

using testing::dense_reference;

struct Seq {
  std::vector<int64_t> tokens;  // all tokens known so far
  int64_t cached = 0;           // tokens already in the KV cache
  std::vector<int32_t> blocks;
};

class FlatBatchHarness {
 public:
  FlatBatchHarness(CausalLM& model, int64_t block_size, int64_t num_blocks, uint64_t seed)
      : model_(model), block_size_(block_size), rng_(seed) {
    kv_ = allocate_kv_caches(model.num_layers(), num_blocks, block_size, model.local_kv_heads(), model.head_dim(),
                             model.options());
    free_.resize(static_cast<size_t>(num_blocks));
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), rng_);  // non-contiguous block tables
  }

  // One step: sequence i computes `counts[i]` of its not-yet-cached tokens (0 = not scheduled).
  // Returns (hidden [T, hidden], logits [num_seqs_scheduled, vocab], rows per seq).
  struct StepOut {
    at::Tensor hidden, logits;
    std::vector<std::pair<size_t, int64_t>> rows;  // (seq index, first position) per scheduled seq
    std::vector<int64_t> counts;
  };
  StepOut step(std::vector<Seq>& seqs, const std::vector<int64_t>& counts) {
    std::vector<batching::SeqSlot> slots;
    std::vector<int64_t> ids;
    StepOut out;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (counts[i] == 0) continue;
      Seq& s = seqs[i];
      const int64_t need = s.cached + counts[i];
      while (static_cast<int64_t>(s.blocks.size()) * block_size_ < need) {
        s.blocks.push_back(free_.back());
        free_.pop_back();
      }
      std::vector<int32_t> new_tokens;
      for (int64_t p = s.cached; p < need; ++p) {
        ids.push_back(s.tokens[static_cast<size_t>(p)]);
        new_tokens.push_back(static_cast<int32_t>(s.tokens[static_cast<size_t>(p)]));
      }
      slots.push_back(testing::seq_slot(s.cached, std::move(new_tokens), s.blocks));
      out.rows.emplace_back(i, s.cached);
      out.counts.push_back(counts[i]);
    }
    batching::FlatBatch batch = batching::flatten_slots(slots, block_size_);
    const batching::BatchMeta& meta = batch.meta;
    at::Tensor tokens = batch.token_ids;
    EXPECT_TRUE(tokens.equal(at::tensor(ids, at::kLong)));
    out.hidden = model_.forward(tokens, meta, kv_);
    out.logits = model_.compute_logits(out.hidden, meta.logits_rows);
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].cached += counts[i];
    return out;
  }

 private:
  CausalLM& model_;
  int64_t block_size_;
  std::mt19937_64 rng_;
  std::vector<KVCache> kv_;
  std::vector<int32_t> free_;
};

void run_mixed_batch(const ModelConfig& cfg, uint64_t seed) {
  at::NoGradGuard no_grad;
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  testing::randomize(*model, seed);
  auto params = testing::parameters_of(*model);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> tok(0, cfg.vocab_size - 1);

  const std::vector<int64_t> prompt_lens = {5, 1, 9, 3};
  std::vector<Seq> seqs(prompt_lens.size());
  for (size_t i = 0; i < seqs.size(); ++i)
    for (int64_t j = 0; j < prompt_lens[i]; ++j) seqs[i].tokens.push_back(tok(rng));

  FlatBatchHarness h(*model, /*block_size=*/4, /*num_blocks=*/64, seed);
  // Step plan: seq 2's prompt is chunked (4 then 5 tokens); seq 3 joins at step 1.
  const std::vector<std::vector<int64_t>> plan = {{5, 1, 4, 0}, {1, 1, 5, 3}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 0, 1, 1}};
  double worst = 0;
  for (size_t st = 0; st < plan.size(); ++st) {
    // Decode steps feed a new (random) token for sequences whose prompt is done.
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (plan[st][i] == 1 && seqs[i].cached == static_cast<int64_t>(seqs[i].tokens.size()))
        seqs[i].tokens.push_back(tok(rng));
    }
    auto out = h.step(seqs, plan[st]);
    int64_t row = 0;
    for (size_t k = 0; k < out.rows.size(); ++k) {
      const auto [si, first] = out.rows[k];
      const int64_t n = out.counts[k];
      std::vector<int64_t> prefix(seqs[si].tokens.begin(), seqs[si].tokens.begin() + first + n);
      auto ref = dense_reference(cfg, params, prefix);
      at::Tensor got_h = out.hidden.narrow(0, row, n);
      at::Tensor want_h = ref.hidden.narrow(0, first, n);
      const double dh = (got_h - want_h).abs().max().item<double>();
      const double dl = (out.logits[static_cast<int64_t>(k)] - ref.logits[first + n - 1]).abs().max().item<double>();
      worst = std::max({worst, dh, dl});
      EXPECT_LE(dh, 1e-4) << cfg.name << " step " << st << " seq " << si << " hidden";
      EXPECT_LE(dl, 1e-4) << cfg.name << " step " << st << " seq " << si << " logits";
      row += n;
    }
  }
  // Guard against a vacuous comparison: the logits must actually vary.
  EXPECT_GT(worst, 0.0);
}

TEST(FlatBatchForward, LlamaMatchesDenseReference) { run_mixed_batch(testing::tiny_llama_config(false), 1); }
TEST(FlatBatchForward, LlamaTiedMatchesDenseReference) { run_mixed_batch(testing::tiny_llama_config(true), 2); }
TEST(FlatBatchForward, Gpt2MatchesDenseReference) { run_mixed_batch(testing::tiny_gpt2_config(), 3); }

TEST(FlatBatchForward, ModulePathsFollowHuggingFace) {
  auto llama = create_causal_lm(testing::tiny_llama_config(), tp::ParallelContext{}, at::kFloat);
  std::vector<std::string> paths;
  for (auto& [p, m] : llama->named_hookable_modules()) paths.push_back(p);
  for (const char* want : {"model.embed_tokens", "model.layers.1.self_attn.q_proj", "model.layers.0.mlp.act_fn",
                           "model.layers.1.post_attention_layernorm", "model.norm", "lm_head"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), want), paths.end()) << want;
  }
  auto gpt2 = create_causal_lm(testing::tiny_gpt2_config(), tp::ParallelContext{}, at::kFloat);
  paths.clear();
  for (auto& [p, m] : gpt2->named_hookable_modules()) paths.push_back(p);
  for (const char* want : {"transformer.wte", "transformer.wpe", "transformer.h.1.attn.c_attn",
                           "transformer.h.0.mlp.act", "transformer.ln_f", "lm_head"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), want), paths.end()) << want;
  }
}

TEST(PagedAttention, CpuKernelEqualsGenericPath) {
  at::manual_seed(7);
  const int64_t heads = 6, kvh = 2, d = 16, bs = 4;
  std::vector<batching::SeqSlot> slots = {testing::seq_slot(0, 7, {3, 0}), testing::seq_slot(5, 1, {1, 4}),
                                          testing::seq_slot(2, 3, {2, 5})};
  auto meta = batching::flatten_slots(slots, bs).meta;
  KVCache cache = KVCache::allocate(6, bs, kvh, d, at::kFloat);
  cache.key.normal_();
  cache.value.normal_();
  at::Tensor q = at::randn({meta.num_tokens, heads, d});
  at::Tensor k = at::randn({meta.num_tokens, kvh, d}), v = at::randn({meta.num_tokens, kvh, d});
  kernels::write_kv(cache, k, v, meta);
  at::Tensor a = kernels::paged_attention(q, cache, meta, 0.25);
  at::Tensor b = kernels::paged_attention_generic(q, cache, meta, 0.25);
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace nnsight

namespace nnsight {
namespace {

// The sliding window and the logit soft-cap: the CPU kernel equals the
// generic path, and each option really changes the result.
TEST(PagedAttention, SlidingWindowAndSoftcapEqualGenericPath) {
  at::manual_seed(11);
  const int64_t heads = 4, kvh = 2, d = 8, bs = 4;
  // Prefill of 9 (window 3 cuts most keys), a chunk after 5 cached, a decode after 7.
  std::vector<batching::SeqSlot> slots = {testing::seq_slot(0, 9, {3, 0, 6}), testing::seq_slot(5, 3, {1, 4}),
                                          testing::seq_slot(7, 1, {2, 5})};
  auto meta = batching::flatten_slots(slots, bs).meta;
  KVCache cache = KVCache::allocate(7, bs, kvh, d, at::kFloat);
  cache.key.normal_();
  cache.value.normal_();
  at::Tensor q = at::randn({meta.num_tokens, heads, d}) * 3;
  kernels::write_kv(cache, at::randn({meta.num_tokens, kvh, d}), at::randn({meta.num_tokens, kvh, d}), meta);
  const at::Tensor plain = kernels::paged_attention(q, cache, meta, 0.3);
  for (kernels::AttentionOptions o :
       {kernels::AttentionOptions{3, 0.0}, kernels::AttentionOptions{0, 1.5}, kernels::AttentionOptions{2, 2.0}}) {
    at::Tensor a = kernels::paged_attention(q, cache, meta, 0.3, o);
    at::Tensor b = kernels::paged_attention_generic(q, cache, meta, 0.3, o);
    EXPECT_LE((a - b).abs().max().item<double>(), 1e-5) << o.sliding_window << " " << o.logit_softcap;
    EXPECT_GT((a - plain).abs().max().item<double>(), 1e-3) << o.sliding_window << " " << o.logit_softcap;
  }
  // A window at least as long as every context changes nothing.
  kernels::AttentionOptions wide{64, 0.0};
  EXPECT_TRUE(at::equal(kernels::paged_attention(q, cache, meta, 0.3, wide), plain));
  // Window 1: each query sees only its own key, so the output is that token's value.
  kernels::AttentionOptions one{1, 0.0};
  at::Tensor self = kernels::paged_attention(q, cache, meta, 0.3, one);              // [T, heads, d]
  at::Tensor v = cache.value.view({-1, kvh, d}).index_select(0, meta.slot_mapping);  // [T, kvh, d]
  EXPECT_TRUE(at::allclose(self, v.repeat_interleave(heads / kvh, 1), 1e-6, 1e-6));
}

}  // namespace
}  // namespace nnsight
