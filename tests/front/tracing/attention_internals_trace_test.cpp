// Attention internals through traces on a served model (the interleaver's
// side of models/attention_points.h): the points are envoys like any module
// value -- read, written, iterated over steps, cached -- and the pattern is
// computed only for the requests whose trace asks. References are
// transformers' eager attention on the fixture checkpoints
// (tests/data/attention/<arch>, scripts/make-attention-fixtures): a GQA
// model with a sliding window (mistral), one with window and soft-cap
// (gemma2), an MoE (mixtral) and GPT-2.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include <nnsight/nnsight.hpp>

#include "core/safetensors/safetensors_file.h"

namespace nnsight {
namespace {

std::string data_dir() { return std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/"; }

// max |got - want| / max(1, max |want|) over want's finite entries; the
// infinite ones (masked scores) must be equal.
double diff(const at::Tensor& got, const at::Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  if (got.sizes() != want.sizes()) return std::numeric_limits<double>::infinity();
  const at::Tensor g = got.to(at::kFloat), finite = at::isfinite(want);
  EXPECT_TRUE(at::equal(g.masked_select(~finite), want.masked_select(~finite)));
  const at::Tensor w = want.masked_select(finite);
  return (g.masked_select(finite) - w).abs().max().item<double>() / std::max(1.0, w.abs().max().item<double>());
}

SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

class AttentionTrace : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string arch = GetParam();
    ref_ = std::make_unique<SafetensorsFile>(data_dir() + "attention/" + arch + "/reference.safetensors");
    lm_ = std::make_unique<LanguageModel>(
        EngineArgs().model(data_dir() + ref_->metadata().at("checkpoint")).kv_cache_memory_mb(8).show_progress(false));
    const std::string root = arch == "gpt2" ? "transformer.h.1" : "model.layers.1";
    layer_ = root;
    attn_ = root + "." + ref_->metadata().at("attention");
    const at::Tensor ids = ref_->load("ids");
    ids_.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  at::Tensor want(const std::string& name) const { return ref_->load(name); }

  std::unique_ptr<SafetensorsFile> ref_;
  std::unique_ptr<LanguageModel> lm_;
  std::string layer_, attn_;
  std::vector<int32_t> ids_;
};

TEST_P(AttentionTrace, ReadsEqualTransformersEager) {
  Saved pattern, scores, q, k, v, z, mid;
  auto out = lm_->trace(ids_, greedy(1), [&](Tracer&) {
    q = lm_->envoy(attn_ + ".q").output().save();
    k = lm_->envoy(attn_ + ".k").output().save();
    v = lm_->envoy(attn_ + ".v").output().save();
    scores = lm_->envoy(attn_ + ".scores").output().save();
    pattern = lm_->envoy(attn_ + ".pattern").output().save();
    z = lm_->envoy(attn_ + ".z").output().save();
    mid = lm_->envoy(layer_ + ".resid_mid").output().save();
  });
  EXPECT_LE(diff(out[pattern], want("pattern.1")), 1e-5);
  EXPECT_LE(diff(out[scores], want("scores.1")), 1e-5);
  EXPECT_LE(diff(out[q], want("q.1")), 1e-5);
  EXPECT_LE(diff(out[k], want("k.1")), 1e-5);
  EXPECT_LE(diff(out[v], want("v.1")), 1e-5);
  EXPECT_LE(diff(out[z], want("z.1")), 1e-5);
  EXPECT_LE(diff(out[mid], want("resid_mid.1")), 1e-5);
}

// Head ablation written two ways: a whole new pattern, and an in-place
// indexed assignment into the model's own.
TEST_P(AttentionTrace, HeadAblationEqualsTransformers) {
  const int64_t head = std::stoll(ref_->metadata().at("ablate_head"));
  ASSERT_EQ(ref_->metadata().at("ablate_layer"), "1");
  const at::Tensor last = want("ablated.logits")[static_cast<int64_t>(ids_.size()) - 1];
  at::Tensor keep = at::ones({want("pattern.1").size(0), 1, 1});
  keep[head] = 0;
  Saved whole, indexed;
  auto a = lm_->trace(ids_, greedy(1), [&](Tracer&) {
    auto p = lm_->envoy(attn_ + ".pattern");
    p.output() = p.output() * keep;
    whole = lm_->logits().save();
  });
  auto b = lm_->trace(ids_, greedy(1), [&](Tracer&) {
    lm_->envoy(attn_ + ".pattern").output()[head] = 0;
    indexed = lm_->logits().save();
  });
  EXPECT_LE(diff(a[whole][0], last), 1e-5);
  EXPECT_LE(diff(b[indexed][0], last), 1e-5);
}

// One trace's invoke reads the pattern, the other's and a plain request ride
// in the same steps: they keep the fused kernel, bit for bit.
TEST_P(AttentionTrace, OnlyTheAskingRequestPaysInAMixedBatch) {
  const std::vector<int32_t> other = {5, 9, 33, 71, 12, 250, 18, 40, 41, 7, 3};
  Saved solo_logits;
  auto solo = lm_->trace(other, greedy(1), [&](Tracer&) { solo_logits = lm_->logits().save(); });
  RequestOutput plain_solo = lm_->llm().submit(other, greedy(3)).result.get();
  Saved pattern, logits0, logits1;
  auto plain = lm_->llm().submit(other, greedy(3));
  auto out = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(ids_, [&] {
      pattern = lm_->envoy(attn_ + ".pattern").output().save();
      logits0 = lm_->logits().save();
    });
    t.invoke(other, [&] { logits1 = lm_->logits().save(); });
  });
  EXPECT_LE(diff(out[pattern], want("pattern.1")), 1e-5);
  EXPECT_LE(diff(out[logits0][0], want("logits")[static_cast<int64_t>(ids_.size()) - 1]), 1e-4);
  EXPECT_TRUE(at::equal(out[logits1], solo[solo_logits]));
  EXPECT_EQ(plain.result.get().token_ids, plain_solo.token_ids);
}

// Iterated over generation steps and cached: each step's pattern covers the
// keys cached so far, and its rows are probabilities.
TEST_P(AttentionTrace, PatternsOfEveryStepAndTheCache) {
  const int64_t n = static_cast<int64_t>(ids_.size()), heads = want("pattern.1").size(0);
  Saved each;
  CacheHandle cache;
  auto out = lm_->trace(ids_, greedy(3), [&](Tracer& t) {
    cache = t.cache({attn_ + ".pattern"});
    t.all([&](const Step&) { each = lm_->envoy(attn_ + ".pattern").output().save_each(); });
  });
  const auto steps = out.list(each);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_LE(diff(steps[0], want("pattern.1")), 1e-5);
  for (int64_t s = 1; s < 3; ++s) {
    ASSERT_EQ(steps[s].sizes(), (std::vector<int64_t>{heads, 1, n + s}));
    EXPECT_LE((steps[s].sum(-1) - 1).abs().max().item<double>(), 1e-5);
  }
  const auto cached = out.cache(cache).at(attn_ + ".pattern");
  ASSERT_EQ(cached.size(), 3u);
  for (size_t s = 0; s < 3; ++s) EXPECT_TRUE(at::equal(cached[s], steps[s]));
}

INSTANTIATE_TEST_SUITE_P(Architectures, AttentionTrace, ::testing::Values("mistral", "gemma2", "mixtral", "gpt2"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace nnsight
