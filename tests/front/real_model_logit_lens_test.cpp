// The logit lens on the default model: its last layer is the model's own
// prediction (compared with the logits the engine computes), the answer
// " Paris" appears, options select rows and columns, and the picture has a
// cell per (layer, position).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nnsight/display.hpp>
#include <nnsight/nnsight.hpp>

#include "support/real_model.h"

namespace nnsight {
namespace {

LanguageModel& lm() {
  static LanguageModel* m = new LanguageModel(EngineArgs().model(testing::default_model_path()).show_progress(false));
  return *m;
}

const char* kEiffel = "The Eiffel Tower is located in the city of";

TEST(RealModelLogitLens, LastLayerIsTheModelsPrediction) {
  LogitLens lens = logit_lens(lm(), kEiffel);
  const int64_t n = static_cast<int64_t>(lm().encode(kEiffel).size());
  ASSERT_EQ(lens.num_layers(), 30);
  ASSERT_EQ(lens.num_positions(), n);
  EXPECT_EQ(lens.top_ids.sizes(), (std::vector<int64_t>{30, n}));
  EXPECT_EQ(lens.top_probs.sizes(), (std::vector<int64_t>{30, n}));
  EXPECT_EQ(lens.token(29, -1), " Paris");
  EXPECT_EQ(lens.input_tokens.back(), " of");

  // The engine's logits at the last position: lm_head(norm(layer 29)).
  Saved logits;
  auto out = lm().trace(kEiffel, SamplingParams().temperature(0).max_tokens(1),
                        [&](Tracer&) { logits = lm().logits().save(); });
  at::Tensor p = at::softmax(out[logits][0].to(at::kDouble), -1);
  EXPECT_EQ(lens.token_id(29, -1), p.argmax().item<int64_t>());
  EXPECT_NEAR(lens.prob(29, -1), p.max().item<double>(), 1e-4);
  // Early layers do not know the answer yet.
  EXPECT_NE(lens.token(0, -1), " Paris");
  for (int64_t r = 0; r < 30; ++r)
    for (int64_t c = 0; c < n; ++c) {
      EXPECT_GT(lens.prob(r, c), 0.0);
      EXPECT_LE(lens.prob(r, c), 1.0);
    }
}

TEST(RealModelLogitLens, OptionsPickLayersAndPositions) {
  LogitLens full = logit_lens(lm(), kEiffel);
  LogitLens some = logit_lens(lm(), kEiffel, LogitLensOptions().layers({-1, 0, 12}).positions({-1, 2}));
  EXPECT_EQ(some.layers, (std::vector<int64_t>{29, 0, 12}));
  EXPECT_EQ(some.positions, (std::vector<int64_t>{full.num_positions() - 1, 2}));
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 2; ++c) {
      const int64_t fr = some.layers[static_cast<size_t>(r)], fc = some.positions[static_cast<size_t>(c)];
      EXPECT_EQ(some.token_id(r, c), full.token_id(fr, fc));
      EXPECT_NEAR(some.prob(r, c), full.prob(fr, fc), 1e-5);
    }
  EXPECT_THROW(logit_lens(lm(), kEiffel, LogitLensOptions().layers({30})), Error);
  EXPECT_THROW(logit_lens(lm(), kEiffel, LogitLensOptions().positions({-100})), Error);
  EXPECT_THROW(full.token(30, 0), Error);
}

TEST(RealModelLogitLens, ParametersComeFromTheModelFile) {
  EXPECT_EQ(lm().architecture(), "llama");
  EXPECT_EQ(lm().num_layers(), 30);
  at::Tensor norm = lm().parameter("model.norm.weight");
  EXPECT_EQ(norm.sizes(), (std::vector<int64_t>{576}));
  EXPECT_EQ(norm.scalar_type(), at::kFloat);
  at::Tensor head = lm().parameter("lm_head.weight");
  EXPECT_EQ(head.sizes(), (std::vector<int64_t>{49152, 576}));
  EXPECT_TRUE(at::equal(head, lm().parameter("model.embed_tokens.weight")));  // tied
  try {
    lm().parameter("model.nrom.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no parameter 'model.nrom.weight'"), std::string::npos) << e.what();
  }
}

TEST(RealModelLogitLens, DisplaysAsAHeatmap) {
  LogitLens lens = logit_lens(lm(), kEiffel, LogitLensOptions().positions({-3, -2, -1}));
  nlohmann::json b = mime_bundle_repr(lens);
  const std::string svg = b["image/svg+xml"];
  size_t cells = 0;
  for (size_t p = svg.find("<rect class=\"cell\""); p != std::string::npos; p = svg.find("<rect class=\"cell\"", p + 1))
    ++cells;
  EXPECT_EQ(cells, 90u);
  EXPECT_NE(svg.find(">"
                     " Paris"
                     "</text>"),
            std::string::npos);
  EXPECT_NE(b["text/plain"].get<std::string>().find("\" Paris\""), std::string::npos);
}

}  // namespace
}  // namespace nnsight
