// What docs/tracing.md, docs/iteration.md and docs/envoys.md promise, each
// run once on a tiny random Llama served in process: writing logits, stop(),
// next(), .inputs(), iter with a stride, all() from a step and ending on a
// stop token, per-invoke sampling params with invokes finishing at
// different steps, and the refusal of a value of another invoke used
// before it exists.
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

LanguageModel& lm() {
  static LanguageModel* m = [] {
    static testing::ScratchDir dir;
    testing::write_hf_checkpoint(dir.path(), *testing::tiny_llama());
    return new LanguageModel(EngineArgs().model(dir.path()).kv_cache_memory_mb(16).show_progress(false));
  }();
  return *m;
}

const std::vector<int32_t> kPrompt = {5, 17, 29, 41, 53, 65};
SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

TEST(DocumentedBehaviours, WritingLogitsChoosesTheToken) {
  auto out = lm().trace(kPrompt, greedy(3), [&](Tracer& t) {
    t.iter(0, 3, [&](const Step&) {
      Proxy z = zeros_like(lm().logits());  // [1, vocab]
      z[{0, 42}] = 100.0;
      lm().logits() = z;
    });
  });
  EXPECT_EQ(out.output().token_ids, (std::vector<int32_t>{42, 42, 42}));
}

// docs/iteration.md: stop when a condition on the samples holds (here: at step 2).
TEST(DocumentedBehaviours, StopEndsTheRequestAfterTheStep) {
  auto out = lm().trace(kPrompt, greedy(8), [&](Tracer& t) {
    t.all([&](const Step& s) { t.cond((lm().samples().sum() >= 0) * (s.index == 2), [&] { t.stop(); }); });
  });
  EXPECT_EQ(out.output().token_ids.size(), 3u);
}

TEST(DocumentedBehaviours, NextAddressesTheFollowingStep) {
  Saved by_next, by_iter;
  auto out = lm().trace(kPrompt, greedy(3), [&](Tracer&) {
    auto mlp = lm().envoy("model.layers.1.mlp");
    mlp.output();  // step 0
    by_next = mlp.next().output().save();
  });
  auto ref = lm().trace(kPrompt, greedy(3), [&](Tracer& t) {
    t.iter(1, 2, [&](const Step&) { by_iter = lm().envoy("model.layers.1.mlp").output().save(); });
  });
  EXPECT_TRUE(at::equal(out[by_next], ref[by_iter]));
  EXPECT_EQ(out[by_next].size(0), 1);  // a decode step: one token
}

TEST(DocumentedBehaviours, InputsIsTheTupleOfPositionalInputs) {
  Saved input, inputs;
  auto out = lm().trace(kPrompt, greedy(1), [&](Tracer&) {
    auto mlp = lm().envoy("model.layers.1.mlp");
    input = mlp.input().save();
    inputs = mlp.inputs().save();
  });
  const auto list = out.list(inputs);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_TRUE(at::equal(list[0], out[input]));
}

TEST(DocumentedBehaviours, IterWithAStrideAndAllFromAStep) {
  Saved strided, from2;
  auto out = lm().trace(kPrompt, greedy(7),
                        [&](Tracer& t) { t.iter(0, 6, 2, [&](const Step& s) { strided = s.index.save_each(); }); });
  auto out2 = lm().trace(kPrompt, greedy(7),
                         [&](Tracer& t) { t.all(2, [&](const Step&) { from2 = lm().samples().save_each(); }); });
  std::vector<int64_t> steps;
  for (const auto& x : out.list(strided)) steps.push_back(x.item<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 2, 4}));
  const auto samples = out2.list(from2);
  ASSERT_EQ(samples.size(), 5u);  // steps 2..6 of 7
  for (size_t i = 0; i < samples.size(); ++i)
    EXPECT_EQ(samples[i].reshape({-1})[0].item<int64_t>(), out2.output().token_ids[i + 2]);
}

TEST(DocumentedBehaviours, AllEndsWhenAStopTokenEndsTheRequest) {
  Saved each;
  // The sample of step 2 is replaced by the stop token: the request ends there.
  auto out = lm().trace(kPrompt, greedy(10).stop_token_ids({77}), [&](Tracer& t) {
    t.all([&](const Step& s) {
      Proxy sample = lm().samples();
      each = sample.save_each();
      t.cond(s.index == 2, [&] { lm().samples() = full_like(sample, 77); });
    });
  });
  EXPECT_EQ(out.output().token_ids.size(), 3u);
  EXPECT_EQ(out.output().token_ids.back(), 77);
  EXPECT_EQ(out.list(each).size(), 3u);
}

TEST(DocumentedBehaviours, PerInvokeParamsAndInvokesFinishingAtDifferentSteps) {
  Saved a, b;
  auto out = lm().trace(greedy(1), [&](Tracer& t) {
    t.invoke(kPrompt, greedy(2), [&] { t.all([&](const Step&) { a = lm().samples().save_each(); }); });
    t.invoke(kPrompt, greedy(5), [&] { t.all([&](const Step&) { b = lm().samples().save_each(); }); });
  });
  EXPECT_EQ(out.output(0).token_ids.size(), 2u);
  EXPECT_EQ(out.output(1).token_ids.size(), 5u);
  EXPECT_EQ(out.list(a).size(), 2u);
  EXPECT_EQ(out.list(b).size(), 5u);
  // Same prompt, greedy: the shorter one is a prefix of the longer one.
  EXPECT_EQ(out.output(0).token_ids[1], out.output(1).token_ids[1]);
}

TEST(DocumentedBehaviours, AValueOfAnotherInvokeUsedBeforeItExistsIsRefused) {
  try {
    lm().trace(greedy(1), [&](Tracer& t) {
      Proxy late;
      t.invoke(kPrompt, [&] { late = lm().envoy("model.layers.1.mlp").output(); });
      t.invoke(kPrompt, [&] { lm().envoy("model.layers.0.mlp").output() = late; });
    });
    FAIL() << "layer 1 of invoke 0 does not exist when invoke 1 writes layer 0";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("uses a value of invoke 0"), std::string::npos) << e.what();
  }
}

TEST(DocumentedBehaviours, AValueOfAnotherInvokeUsedBeforeItExistsNamesBothLines) {
  const unsigned read = __LINE__ + 4, write = __LINE__ + 5;
  try {
    lm().trace(greedy(1), [&](Tracer& t) {
      Proxy late;
      t.invoke(kPrompt, [&] { late = lm().envoy("model.layers.1.mlp").output(); });
      t.invoke(kPrompt, [&] { lm().envoy("model.layers.0.mlp").output() = late; });
    });
    FAIL() << "refused";
  } catch (const TraceError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::string(__FILE__) + ":" + std::to_string(read)), std::string::npos) << m;
    EXPECT_NE(m.find(std::string(__FILE__) + ":" + std::to_string(write)), std::string::npos) << m;
  }
}

TEST(DocumentedBehaviours, ReadingASavedNeverAssignedNamesWhereItWasDeclared) {
  const unsigned line = __LINE__ + 1;
  Saved never;
  Saved h;
  TraceResult out = lm().trace(kPrompt, greedy(1), [&](Tracer&) { h = lm().logits().save(); });
  EXPECT_EQ(out[h].size(0), 1);
  try {
    (void)out[never];
    FAIL() << "never was not assigned";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::string(__FILE__) + ":" + std::to_string(line)), std::string::npos) << m;
    EXPECT_NE(m.find("no save was assigned"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace nnsight
