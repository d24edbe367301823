// Invokes with several prompts on the default model (SmolLM2-135M-Instruct),
// greedy, and all() ending on a stop string (docs/invokes.md, docs/iteration.md).
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include "support/real_model.h"

namespace nnsight {
namespace {

LanguageModel& lm() {
  static LanguageModel* m =
      new LanguageModel(EngineArgs().model(testing::default_model_path()).show_progress(false).max_num_seqs(64));
  return *m;
}

SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n); }
const char* kEiffel = "The Eiffel Tower is located in the city of";
const char* kColosseum = "The Colosseum is located in the city of";

TEST(RealModelMultiPromptInvoke, LogitsEqualTwoOnePromptInvokes) {
  Saved both;
  auto one = lm().trace(greedy(1), [&](Tracer& t) {
    t.invoke({kEiffel, kColosseum}, [&] { both = lm().logits().save(); });
  });
  Saved a, b;
  auto two = lm().trace(greedy(1), [&](Tracer& t) {
    t.invoke(kEiffel, [&] { a = lm().logits().save(); });
    t.invoke(kColosseum, [&] { b = lm().logits().save(); });
  });
  ASSERT_EQ(one[both].sizes(), (std::vector<int64_t>{2, 49152}));
  // On CPU the engine is batch invariant: the same bits.
  EXPECT_LE((one[both] - at::cat({two[a], two[b]})).abs().max().item<double>(), 1e-6);
  EXPECT_TRUE(at::equal(one[both], at::cat({two[a], two[b]})));
  ASSERT_EQ(one.outputs().size(), 2u);
  EXPECT_EQ(one.text(0), " Paris");
  EXPECT_EQ(one.text(1), " Rome");
}

TEST(RealModelMultiPromptInvoke, AblationReachesBothPromptsAndNoOtherInvoke) {
  auto ablate = [&] {
    auto mlp = lm().envoy("model.layers.28.mlp");
    mlp.output() = mlp.output() * 0;
  };
  Saved both, clean;
  auto out = lm().trace(greedy(1), [&](Tracer& t) {
    t.invoke({kEiffel, kColosseum}, [&] {
      ablate();
      both = lm().logits().save();
    });
    t.invoke(kEiffel, [&] { clean = lm().logits().save(); });
  });
  Saved a, b, alone;
  auto apart = lm().trace(greedy(1), [&](Tracer& t) {
    t.invoke(kEiffel, [&] {
      ablate();
      a = lm().logits().save();
    });
    t.invoke(kColosseum, [&] {
      ablate();
      b = lm().logits().save();
    });
  });
  auto plain = lm().trace(kEiffel, greedy(1), [&](Tracer&) { alone = lm().logits().save(); });
  EXPECT_TRUE(at::equal(out[both], at::cat({apart[a], apart[b]})));
  EXPECT_TRUE(at::equal(out[clean], plain[alone]));
  EXPECT_FALSE(at::equal(out[both][0], plain[alone][0]));
}

TEST(RealModelMultiPromptInvoke, TextPromptsEqualTheirTokenIds) {
  Saved text, ids;
  auto a = lm().trace(greedy(2), [&](Tracer& t) {
    t.invoke({kEiffel, kColosseum}, [&] { text = lm().logits().save(); });
  });
  const std::vector<std::vector<int32_t>> tokens = {lm().encode(kEiffel), lm().encode(kColosseum)};
  auto b = lm().trace(greedy(2), [&](Tracer& t) { t.invoke(tokens, [&] { ids = lm().logits().save(); }); });
  EXPECT_TRUE(at::equal(a[text], b[ids]));
  EXPECT_EQ(a.output(1).token_ids, b.output(1).token_ids);
}

// docs/iteration.md: all() ends cleanly when a stop string ends the request.
TEST(RealModelTracing, AllEndsWhenAStopStringEndsTheRequest) {
  // Greedy, the prompt continues " Paris" and more; stop on the text of its third token.
  auto free_run = lm().trace(kEiffel, greedy(8).ignore_eos(true), [&](Tracer&) {});
  const auto& ids = free_run.output().token_ids;
  ASSERT_GE(ids.size(), 4u);
  const std::string third = lm().decode({ids[2]});
  ASSERT_FALSE(third.empty());
  ASSERT_EQ(lm().decode({ids[0], ids[1]}).find(third), std::string::npos) << "'" << third << "' occurs earlier";
  Saved each;
  auto out = lm().trace(kEiffel, greedy(8).ignore_eos(true).stop({third}),
                        [&](Tracer& t) { t.all([&](const Step&) { each = lm().samples().save_each(); }); });
  EXPECT_EQ(out.output().finish_reason, FinishReason::kStop);
  ASSERT_EQ(out.output().token_ids.size(), 3u);
  ASSERT_EQ(out.list(each).size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out.list(each)[i].item<int64_t>(), ids[i]);
}

}  // namespace
}  // namespace nnsight
