// envoy.skip(value) on the default model: skipping an MLP with zeros equals
// zeroing its output, alone (the body does not run: a module inside it is
// never reached) and next to an invoke that does not skip (the body runs for
// that invoke only, which sees the unchanged model); a value of the wrong
// shape fails that trace with both shapes.
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include "support/real_model.h"

namespace nnsight {
namespace {

const char* kEiffel = "The Eiffel Tower is located in the city of";

LanguageModel& lm() {
  static LanguageModel* m = new LanguageModel(EngineArgs().model(testing::default_model_path()).show_progress(false));
  return *m;
}

double rel(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

TEST(RealModelSkip, SkippingAnMlpWithZerosEqualsAblatingIt) {
  const SamplingParams p = SamplingParams().temperature(0).max_tokens(1);
  Saved ablated, skipped, plain, beside, out5;
  auto a = lm().trace(kEiffel, p, [&](Tracer&) {
    auto mlp = lm().envoy("model.layers.5.mlp");
    mlp.output() = mlp.output() * 0;
    ablated = lm().logits().save();
  });
  auto s = lm().trace(kEiffel, p, [&](Tracer&) {
    auto mlp = lm().envoy("model.layers.5.mlp");
    mlp.skip(at::zeros({1, 576}));
    out5 = mlp.output().save();
    skipped = lm().logits().save();
  });
  EXPECT_LE(rel(s[skipped], a[ablated]), 1e-6);
  EXPECT_EQ(s[out5].abs().sum().item<double>(), 0.0);
  auto u = lm().trace(kEiffel, p, [&](Tracer&) { plain = lm().logits().save(); });
  EXPECT_GT(rel(a[ablated], u[plain]), 1e-3) << "the ablation must matter";

  // Two invokes in one batch: the first skips, the second does not.
  Saved first, second;
  auto both = lm().trace(p, [&](Tracer& t) {
    t.invoke(kEiffel, [&] {
      lm().envoy("model.layers.5.mlp").skip(0.0);
      first = lm().logits().save();
    });
    t.invoke(kEiffel, [&] { second = lm().logits().save(); });
  });
  EXPECT_LE(rel(both[first], a[ablated]), 1e-6);
  EXPECT_LE(rel(both[second], u[plain]), 1e-6);
}

TEST(RealModelSkip, AModuleInsideASkippedOneIsNeverReached) {
  try {
    lm().trace(kEiffel, SamplingParams().max_tokens(1), [&](Tracer&) {
      auto mlp = lm().envoy("model.layers.5.mlp");
      mlp.skip(0.0);
      mlp["down_proj"].output().save();
    });
    FAIL() << "down_proj does not run when its MLP is skipped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.5.mlp.down_proj.output"), std::string::npos) << e.what();
  }
}

TEST(RealModelSkip, AValueOfTheWrongShapeFailsTheTraceNamingBothShapes) {
  try {
    lm().trace(kEiffel, SamplingParams().max_tokens(1), [&](Tracer&) {
      lm().envoy("model.layers.5.mlp").skip(at::zeros({3, 7}));
    });
    FAIL() << "a [3, 7] value cannot replace [tokens, 576]";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cannot skip `model.layers.5.mlp`"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 7]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("576]"), std::string::npos) << msg;
  }
  // The engine goes on serving.
  Saved l;
  auto ok = lm().trace(kEiffel, SamplingParams().max_tokens(1), [&](Tracer&) { l = lm().logits().save(); });
  EXPECT_EQ(ok[l].size(1), 49152);
}

}  // namespace
}  // namespace nnsight
