// Gradients on the default model. Attribution patching (NNsight's tutorial,
// on the residual stream at the last token): one trace runs a clean and a
// corrupted prompt, the corrupted invoke backpropagates the logit difference
// " Paris" - " Rome", and (clean - corrupted) . grad estimates, per layer, what
// patching that layer's output with the clean one would do to the metric. Real
// patching (one trace per layer) gives the true effects; the estimates must
// rank the layers like them. The gradient trace's forward values equal those
// of the same trace without backward().
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include <nnsight/nnsight.hpp>

#include "support/real_model.h"

namespace nnsight {
namespace {

const char* kClean = "The Eiffel Tower is located in the city of";
const char* kCorrupt = "The Colosseum is located in the city of";
constexpr int kLayers = 30;

LanguageModel& lm() {
  static LanguageModel* m = new LanguageModel(EngineArgs().model(testing::default_model_path()).show_progress(false));
  return *m;
}

int32_t token_of(const std::string& word) {
  std::vector<int32_t> ids = lm().encode(word, /*add_special_tokens=*/false);
  EXPECT_EQ(ids.size(), 1u) << word;
  return ids.at(0);
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
  return r;
}

// Spearman's rank correlation (no ties in these real-valued effects).
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ra = ranks(a), rb = ranks(b);
  double d2 = 0;
  for (size_t i = 0; i < ra.size(); ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  const double n = static_cast<double>(ra.size());
  return 1.0 - 6.0 * d2 / (n * (n * n - 1));
}

TEST(RealModelGradients, AttributionPatchingRanksLayersLikeRealPatching) {
  const int32_t paris = token_of(" Paris"), rome = token_of(" Rome");
  const SamplingParams p = SamplingParams().temperature(0).max_tokens(1);
  auto path = [](int l) { return "model.layers." + std::to_string(l); };

  // One gradient trace: both prompts' layer outputs, the corrupted one's gradients.
  std::vector<Saved> clean(kLayers), corrupt(kLayers), grad(kLayers);
  Saved metric_s;
  auto attr = lm().trace(p, [&](Tracer& t) {
    t.invoke(kClean, [&] {
      for (int l = 0; l < kLayers; ++l) clean[l] = lm().envoy(path(l)).output()[{-1}].save();
    });
    t.invoke(kCorrupt, [&] {
      std::vector<Proxy> h;
      for (int l = 0; l < kLayers; ++l) h.push_back(lm().envoy(path(l)).output());
      auto logits = lm().logits();
      auto metric = logits[{0, paris}] - logits[{0, rome}];
      metric.backward();
      metric_s = metric.save();
      for (int l = 0; l < kLayers; ++l) {
        corrupt[l] = h[l][{-1}].save();
        grad[l] = h[l].grad()[{-1}].save();
      }
    });
  });
  const double corrupt_metric = attr[metric_s].item<double>();
  EXPECT_LT(corrupt_metric, 0) << "the corrupted prompt prefers Rome";

  std::vector<double> estimate(kLayers), real(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    estimate[l] = ((attr[clean[l]] - attr[corrupt[l]]) * attr[grad[l]]).sum().item<double>();
    // Real patching: the clean last-token output of layer l in the corrupted run.
    Saved m;
    auto patched = lm().trace(p, [&](Tracer& t) {
      Proxy h;
      t.invoke(kClean, [&] { h = lm().envoy(path(l)).output()[{-1}]; });
      t.invoke(kCorrupt, [&] {
        lm().envoy(path(l)).output()[{-1}] = h;
        auto logits = lm().logits();
        m = (logits[{0, paris}] - logits[{0, rome}]).save();
      });
    });
    real[l] = patched[m].item<double>() - corrupt_metric;
  }
  for (int l = 0; l < kLayers; ++l)
    std::printf("layer %2d  attribution %+8.3f  real patching %+8.3f\n", l, estimate[l], real[l]);
  const double rho = spearman(estimate, real);
  std::printf("Spearman rank correlation over %d layers: %.3f\n", kLayers, rho);
  EXPECT_GT(rho, 0.8);
  // The layer with the largest real effect is among the estimate's top three.
  const int best = static_cast<int>(std::max_element(real.begin(), real.end()) - real.begin());
  std::vector<double> sorted = estimate;
  std::sort(sorted.rbegin(), sorted.rend());
  EXPECT_GE(estimate[best], sorted[2]) << "layer " << best;
}

TEST(RealModelGradients, ForwardValuesAndTokensEqualTheTraceWithoutBackward) {
  const SamplingParams p = SamplingParams().temperature(0).max_tokens(4);
  Saved h1, l1, g;
  auto with = lm().trace(kClean, p, [&](Tracer&) {
    auto h = lm().envoy("model.layers.10.mlp").output();
    h1 = h.save();
    auto logits = lm().logits();
    l1 = logits.save();
    logits.log_softmax(-1)[{0, token_of(" Paris")}].backward();
    g = h.grad().save();
  });
  Saved h2, l2;
  auto without = lm().trace(kClean, p, [&](Tracer&) {
    h2 = lm().envoy("model.layers.10.mlp").output().save();
    l2 = lm().logits().save();
  });
  EXPECT_TRUE(at::equal(with[h1], without[h2]));
  EXPECT_TRUE(at::equal(with[l1], without[l2]));
  EXPECT_EQ(with.text(), without.text());
  EXPECT_GT(with[g].abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace nnsight
