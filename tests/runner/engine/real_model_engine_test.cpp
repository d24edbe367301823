// The engine on the default model (SmolLM2-135M-Instruct, Q4_1 GGUF).
#include <gtest/gtest.h>

#include <nnsight/llm.hpp>

#include "support/real_model.h"

namespace nnsight {
namespace {

LLM& llm() {
  static LLM* instance = new LLM(EngineArgs().model(testing::default_model_path()).show_progress(false));
  return *instance;
}

TEST(RealModelEngine, GreedyCapitalOfFranceIsParis) {
  auto out = llm().generate("The capital of France is", SamplingParams().temperature(0).max_tokens(4));
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.text.rfind(" Paris", 0), 0u) << "got: '" << out.text << "'";
  EXPECT_EQ(out.token_ids.front(), llm().encode(" Paris", false).front());
}

TEST(RealModelEngine, BatchedEqualsAloneAndStopStringsCut) {
  const std::vector<std::string> prompts = {"The capital of France is", "1, 2, 3, 4,", "Once upon a time",
                                            "def fibonacci(n):"};
  auto params = SamplingParams().temperature(0).max_tokens(12);
  auto batched = llm().generate(prompts, params);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = llm().generate(prompts[i], params);
    EXPECT_EQ(batched[i].token_ids, alone.token_ids) << prompts[i];
    EXPECT_EQ(batched[i].text, alone.text);
  }
  // Counting continues " 5, 6, ..."; a stop string ", 7" ends it and is not in the text.
  auto counted = llm().generate("1, 2, 3, 4,", SamplingParams().temperature(0).max_tokens(20).stop({", 7"}));
  EXPECT_EQ(counted.finish_reason, FinishReason::kStop);
  EXPECT_EQ(counted.text, " 5, 6") << counted.text;
}

}  // namespace
}  // namespace nnsight
