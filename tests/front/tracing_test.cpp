// Tracing on a tiny random Llama served in process: reads, writes, invokes,
// iteration, logits/samples/result, cache, errors and isolation.
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

class Tracing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir();
    model_ = testing::tiny_llama().get();
    keep_ = testing::tiny_llama();
    testing::write_hf_checkpoint(dir_->path(), *keep_);
    params_ = new std::map<std::string, at::Tensor>(testing::parameters_of(*keep_));
    lm_ = new LanguageModel(EngineArgs().model(dir_->path()).kv_cache_memory_mb(16).show_progress(false));
  }
  static void TearDownTestSuite() {
    delete lm_;
    delete params_;
    keep_.reset();
    delete dir_;
  }
  static std::vector<int32_t> prompt(int seed, int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(3 + (seed * 17 + i * 11) % 90);
    return p;
  }
  static std::vector<int64_t> as64(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }
  static SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

  static testing::ScratchDir* dir_;
  static CausalLM* model_;
  static std::shared_ptr<CausalLM> keep_;
  static std::map<std::string, at::Tensor>* params_;
  static LanguageModel* lm_;
};
testing::ScratchDir* Tracing::dir_ = nullptr;
CausalLM* Tracing::model_ = nullptr;
std::shared_ptr<CausalLM> Tracing::keep_;
std::map<std::string, at::Tensor>* Tracing::params_ = nullptr;
LanguageModel* Tracing::lm_ = nullptr;

TEST_F(Tracing, SavesEqualTheDenseReference) {
  auto p = prompt(1, 7);
  Saved hidden, logits;
  auto out = lm_->trace(p, greedy(1), [&](Tracer&) {
    hidden = lm_->envoy("model.norm").output().save();
    logits = lm_->logits().save();
  });
  auto ref = testing::dense_reference(keep_->config(), *params_, as64(p));
  ASSERT_EQ(out[hidden].sizes(), (std::vector<int64_t>{7, 32}));
  EXPECT_LE((out[hidden] - ref.hidden).abs().max().item<double>(), 1e-4);
  ASSERT_EQ(out[logits].sizes(), (std::vector<int64_t>{1, 97}));
  EXPECT_LE((out[logits][0] - ref.logits[6]).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(out.output().token_ids.front(), ref.logits[6].argmax().item<int64_t>());
}

TEST_F(Tracing, AblationInOneInvokeLeavesTheOtherUntouched) {
  auto p = prompt(2, 9);
  Saved clean_logits, zeroed, ablated_logits;
  auto out = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(p, [&] { clean_logits = lm_->logits().save(); });
    t.invoke(p, [&] {
      auto mlp = lm_->envoy("model.layers.1.mlp");
      mlp.output() = mlp.output() * 0;
      zeroed = mlp.output().save();
      ablated_logits = lm_->logits().save();
    });
  });
  auto solo = lm_->trace(p, greedy(1), [&](Tracer&) { clean_logits = lm_->logits().save(); });
  EXPECT_EQ(out[zeroed].abs().sum().item<double>(), 0.0);
  EXPECT_LE((out[clean_logits] - solo[clean_logits]).abs().max().item<double>(), 1e-5);
  EXPECT_GT((out[ablated_logits] - out[clean_logits]).abs().max().item<double>(), 1e-3);
}

TEST_F(Tracing, IterationCountsGenerationSteps) {
  auto p = prompt(3, 5);
  Saved logits, all_logits;
  auto out = lm_->trace(p, greedy(5),
                        [&](Tracer& t) { t.iter(0, 3, [&](const Step&) { logits = lm_->logits().save_each(); }); });
  auto rows = out.list(logits);
  ASSERT_EQ(rows.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rows[i].argmax().item<int64_t>(), out.output().token_ids[i]);
  auto out2 =
      lm_->trace(p, greedy(6), [&](Tracer& t) { t.all([&](const Step&) { all_logits = lm_->logits().save_each(); }); });
  EXPECT_EQ(out2.list(all_logits).size(), 6u);
}

TEST_F(Tracing, ZeroingOnlyAtStepTwo) {
  auto p = prompt(4, 6);
  Saved checks;
  auto out = lm_->trace(p, greedy(5), [&](Tracer& t) {
    auto layer = lm_->envoy("model.layers.0");
    t.iter(0, 5, [&](const Step& s) {
      auto o = layer.output();
      t.cond(s.index == 2, [&] { layer.output() = o * 0; });
      checks = (layer.output().abs().sum() == 0).save_each();
    });
  });
  std::vector<bool> got;
  for (const auto& c : out.list(checks)) got.push_back(c.item<bool>());
  EXPECT_EQ(got, (std::vector<bool>{false, false, true, false, false}));
}

TEST_F(Tracing, ReplacingSamplesContinuesFromTheChosenToken) {
  auto p = prompt(5, 4);
  const int32_t chosen = 42;
  Saved result;
  auto out = lm_->trace(p, greedy(4), [&](Tracer& t) {
    lm_->samples() = at::full({1}, chosen, at::kLong);
    result = t.result().save();
  });
  ASSERT_EQ(out.output().token_ids.front(), chosen);
  auto cont = p;
  cont.push_back(chosen);
  auto follow = lm_->trace(cont, greedy(3), [&](Tracer&) {});
  std::vector<int32_t> rest(out.output().token_ids.begin() + 1, out.output().token_ids.end());
  EXPECT_EQ(rest, follow.output().token_ids);
  EXPECT_EQ(out[result].numel(), 4);
}

TEST_F(Tracing, ActivationPatchingAcrossInvokes) {
  auto src = prompt(6, 6), dst = prompt(7, 8);
  Saved patched_logits, src_logits;
  auto out = lm_->trace(greedy(1), [&](Tracer& t) {
    Proxy h;
    t.invoke(src, [&] {
      h = lm_->envoy("model.layers.1").output()[{-1}];
      src_logits = lm_->logits().save();
    });
    t.invoke(dst, [&] {
      // The last layer's residual at the last token, copied from the source: the
      // final norm and head then see the source's state, so the logits match.
      lm_->envoy("model.layers.1").output()[{-1}] = h;
      patched_logits = lm_->logits().save();
    });
  });
  EXPECT_LE((out[patched_logits] - out[src_logits]).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(out.output(0).token_ids, out.output(1).token_ids);
}

TEST_F(Tracing, CacheKeepsEveryStepOfEachModule) {
  auto p = prompt(8, 5);
  CacheHandle c;
  auto out = lm_->trace(p, greedy(3), [&](Tracer& t) { c = t.cache({"model.layers.1", "model.layers.0.self_attn"}); });
  auto cache = out.cache(c);
  ASSERT_EQ(cache["model.layers.1"].size(), 3u);
  EXPECT_EQ(cache["model.layers.1"][0].size(0), 5);  // prefill rows
  EXPECT_EQ(cache["model.layers.1"][1].size(0), 1);  // one decode row
  EXPECT_EQ(cache["model.layers.0.self_attn"].size(), 3u);
}

TEST_F(Tracing, PromptlessInvokeSeesEveryPromptOfItsTraceOnly) {
  auto a = prompt(9, 3), b = prompt(10, 4);
  Saved rows;
  // A concurrent trace of another prompt must not be visible.
  auto other = lm_->submit(prompt(11, 6), greedy(1), [&](Tracer&) {});
  auto out = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(a, [] {});
    t.invoke(b, [] {});
    t.invoke([&] { rows = lm_->envoy("model.layers.0").output().save(); });
  });
  other.get();
  EXPECT_EQ(out[rows].size(0), 7);
}

TEST_F(Tracing, StaticErrorsNameTheLine) {
  try {
    lm_->envoy("model.layers.1.mpl");
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'model.layers.1.mlp'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tracing_test.cpp"), std::string::npos) << e.what();
  }
  try {
    lm_->trace(prompt(1, 3), greedy(1), [&](Tracer&) {
      lm_->envoy("model.layers.1").output().save();
      lm_->envoy("model.layers.0").output().save();  // earlier in the same step
    });
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("out-of-order"), std::string::npos) << e.what();
  }
}

TEST_F(Tracing, RuntimeErrorEndsOnlyItsTrace) {
  std::vector<std::future<TraceResult>> futures;
  std::vector<Saved> saved(8);
  for (int i = 0; i < 8; ++i) {
    futures.push_back(lm_->submit(prompt(20 + i, 4 + i), greedy(3), [&, i](Tracer&) {
      auto mlp = lm_->envoy("model.layers.0.mlp");
      if (i == 2 || i == 5) mlp.output() = at::zeros({3, 7});  // shape mismatch
      saved[i] = lm_->logits().save();
    }));
  }
  for (int i = 0; i < 8; ++i) {
    if (i == 2 || i == 5) {
      try {
        futures[i].get();
        ADD_FAILURE() << "trace " << i << " should fail";
      } catch (const TraceError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("shape mismatch"), std::string::npos) << msg;
        EXPECT_NE(msg.find("tracing_test.cpp"), std::string::npos) << msg;
      }
      continue;
    }
    auto out = futures[i].get();
    Saved solo_logits;
    auto solo = lm_->trace(prompt(20 + i, 4 + i), greedy(3), [&](Tracer&) { solo_logits = lm_->logits().save(); });
    EXPECT_EQ(out.output().token_ids, solo.output().token_ids);
    EXPECT_LE((out[saved[i]] - solo[solo_logits]).abs().max().item<double>(), 1e-5);
  }
}

TEST_F(Tracing, MissedProviderIsReported) {
  try {
    lm_->trace(prompt(2, 3), greedy(2),
               [&](Tracer& t) { t.iter(0, 4, [&](const Step&) { lm_->logits().save_each(); }); });
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("the request finished before step 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nnsight
