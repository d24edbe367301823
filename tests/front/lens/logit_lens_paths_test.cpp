// The logit lens finds the decoder layers, final norm and LM head by their
// Hugging Face paths, also under a multimodal checkpoint's language model
// (model.language_model.*): on the tiny Gemma 3 multimodal fixture its last
// layer's row is the model's own prediction.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nnsight/nnsight.hpp>

#include "support/hf_fixtures.h"

namespace nnsight {
namespace {

TEST(LogitLensPaths, AMultimodalCheckpointsLanguageModel) {
  LanguageModel lm(
      EngineArgs().model(testing::hf_fixture_dir(testing::HfFixtureCase{5, "gemma3"})).show_progress(false));
  const std::vector<int32_t> prompt = {46, 171, 95, 284, 106};
  LogitLens lens = logit_lens(lm, lm.decode(prompt));
  ASSERT_EQ(lens.num_layers(), 2);
  Saved logits;
  auto out = lm.trace(lm.decode(prompt), SamplingParams().temperature(0).max_tokens(1),
                      [&](Tracer&) { logits = lm.logits().save(); });
  const at::Tensor p = at::softmax(out[logits][0].to(at::kDouble), -1);
  EXPECT_EQ(lens.token_id(1, -1), p.argmax().item<int64_t>());
  EXPECT_NEAR(lens.prob(1, -1), p.max().item<double>(), 1e-4);
}

}  // namespace
}  // namespace nnsight
