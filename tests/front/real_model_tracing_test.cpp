// Tracing acceptance on the default model (SmolLM2-135M-Instruct), greedy.
#include <gtest/gtest.h>

#include <thread>

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

TEST(RealModelTracing, EiffelTowerLogitsSayParis) {
  Saved logits;
  auto out = lm().trace(kEiffel, greedy(1), [&](Tracer&) { logits = lm().logits().save(); });
  ASSERT_EQ(out[logits].sizes(), (std::vector<int64_t>{1, 49152}));
  const int64_t top = out[logits][0].argmax().item<int64_t>();
  EXPECT_EQ(lm().decode({static_cast<int32_t>(top)}), " Paris");
}

// Scan on the default model (GQA attention, a packed GGUF): the shapes and
// dtypes a real trace of the same body saves, text prompt tokenized as the
// engine does, a later step included.
TEST(RealModelTracing, ScanReportsWhatTheTraceSaves) {
  Saved pattern, q, h, logits, later;
  auto body = [&](Tracer& t) {
    Envoy attn = lm().envoy("model.layers.3.self_attn");
    q = attn["q"].output().save();
    pattern = attn["pattern"].output().save();
    h = (lm().envoy("model.layers.5").output() * 2).save();
    logits = lm().logits().save();
    t.iter(1, 2, [&](const Step&) { later = attn["pattern"].output().save(); });
  };
  ScanResult s = lm().scan(kEiffel, greedy(2), body);
  TraceResult r = lm().trace(kEiffel, greedy(2), body);
  for (const Saved* v : {&pattern, &q, &h, &logits, &later}) {
    EXPECT_EQ(s[*v].shape, r[*v].sizes().vec()) << v->name() << ": " << s[*v].describe();
    EXPECT_EQ(s[*v].dtype, r[*v].scalar_type()) << v->name();
  }
}

TEST(RealModelTracing, IterationMatchesGeneratedTokens) {
  Saved logits, every;
  auto out = lm().trace(kEiffel, greedy(3),
                        [&](Tracer& t) { t.iter(0, 3, [&](const Step&) { logits = lm().logits().save_each(); }); });
  auto rows = out.list(logits);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rows[i].argmax().item<int64_t>(), out.output().token_ids[i]);
  auto ten = lm().trace(kEiffel, greedy(10).ignore_eos(true),
                        [&](Tracer& t) { t.all([&](const Step&) { every = lm().logits().save_each(); }); });
  EXPECT_EQ(ten.list(every).size(), 10u);
}

TEST(RealModelTracing, AblationCleanAndAblatedInOneTrace) {
  Saved zeroed, unused, clean_l, abl_l;
  auto ablate = [&](Saved& out) {
    auto mlp = lm().envoy("model.layers.28.mlp");
    mlp.output() = mlp.output() * 0;
    out = mlp.output().save();
  };
  auto both = lm().trace(greedy(1), [&](Tracer& t) {
    t.invoke(kEiffel, [&] { clean_l = lm().logits().save(); });
    t.invoke(kEiffel, [&] {
      ablate(zeroed);
      abl_l = lm().logits().save();
    });
  });
  Saved solo_clean, solo_abl;
  auto clean = lm().trace(kEiffel, greedy(1), [&](Tracer&) { solo_clean = lm().logits().save(); });
  auto abl = lm().trace(kEiffel, greedy(1), [&](Tracer&) {
    ablate(unused);
    solo_abl = lm().logits().save();
  });
  EXPECT_EQ(both[zeroed].abs().sum().item<double>(), 0.0);
  EXPECT_GT((both[abl_l] - both[clean_l]).abs().max().item<double>(), 1e-2);
  EXPECT_LE((both[clean_l] - clean[solo_clean]).abs().max().item<double>(), 1e-4);
  EXPECT_LE((both[abl_l] - abl[solo_abl]).abs().max().item<double>(), 1e-4);
}

TEST(RealModelTracing, ZeroingALayerOnlyAtStepTwo) {
  Saved checks;
  auto out = lm().trace(kEiffel, greedy(5).ignore_eos(true), [&](Tracer& t) {
    auto layer = lm().envoy("model.layers.10");
    t.iter(0, 5, [&](const Step& s) {
      t.cond(s.index == 2, [&] { layer.output() = layer.output() * 0; });
      checks = (layer.output().abs().sum() == 0).save_each();
    });
  });
  std::vector<bool> got;
  for (const auto& c : out.list(checks)) got.push_back(c.item<bool>());
  EXPECT_EQ(got, (std::vector<bool>{false, false, true, false, false}));
}

TEST(RealModelTracing, ActivationPatchingChangesTheAnswer) {
  const std::string src = kEiffel, dst = "The Colosseum is located in the city of";
  auto clean = lm().trace(dst, greedy(1), [&](Tracer&) {});
  auto out = lm().trace(greedy(1), [&](Tracer& t) {
    Proxy h;
    t.invoke(src, [&] { h = lm().envoy("model.layers.25").output()[{-1}]; });
    t.invoke(dst, [&] { lm().envoy("model.layers.25").output()[{-1}] = h; });
  });
  EXPECT_EQ(clean.text(), " Rome");
  EXPECT_EQ(out.text(0), " Paris");
  EXPECT_EQ(out.text(1), " Paris");  // the target now answers like the source
}

TEST(RealModelTracing, ReplacingTheFirstSampleSteersTheText) {
  const int32_t london = lm().encode(" London", false).front();
  auto out = lm().trace(kEiffel, greedy(6), [&](Tracer&) { lm().samples() = at::full({1}, london, at::kLong); });
  EXPECT_EQ(out.output().token_ids.front(), london);
  EXPECT_EQ(out.text().rfind(" London", 0), 0u) << out.text();
  // The rest is what the model writes after " London".
  auto after = lm().llm().generate(std::string(kEiffel) + " London", greedy(5));
  EXPECT_EQ(out.text(), " London" + after.text);
}

TEST(RealModelTracing, ErrorsAndIsolationInABatch) {
  EXPECT_THROW(lm().envoy("model.layers.30.mlp"), TraceError);
  try {
    lm().trace(kEiffel, greedy(1), [&](Tracer&) {
      lm().envoy("model.layers.9").output().save();
      lm().envoy("model.layers.3").output().save();
    });
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("out-of-order access"), std::string::npos) << e.what();
  }
  const std::vector<std::string> prompts = {
      "The capital of France is", "Once upon a time", "1, 2, 3,",      "The Eiffel Tower is", "def main():",
      "Hello, my name is",        "The sun is",       "Water boils at"};
  std::vector<Saved> saved(8);
  std::vector<std::future<TraceResult>> futures;
  for (int i = 0; i < 8; ++i)
    futures.push_back(lm().submit(prompts[i], greedy(4), [&, i](Tracer&) {
      if (i == 1 || i == 6) lm().envoy("model.layers.4.mlp").output() = at::zeros({2, 3});
      saved[i] = lm().envoy("model.layers.12").output().save();
    }));
  for (int i = 0; i < 8; ++i) {
    if (i == 1 || i == 6) {
      EXPECT_THROW(futures[i].get(), TraceError);
      continue;
    }
    auto out = futures[i].get();
    Saved s;
    auto solo = lm().trace(prompts[i], greedy(4), [&](Tracer&) { s = lm().envoy("model.layers.12").output().save(); });
    EXPECT_EQ(out.output().token_ids, solo.output().token_ids) << prompts[i];
    EXPECT_LE((out[saved[i]] - solo[s]).abs().max().item<double>(), 1e-4);
  }
}

TEST(RealModelTracing, EightThreadsTwentyTracesEachMatchSoloRuns) {
  const std::vector<std::string> prompts = {"The capital of France is", "Once upon a time", "Water boils at",
                                            "The Eiffel Tower is located in"};
  std::vector<std::vector<int32_t>> expected;
  std::vector<at::Tensor> expected_h;
  for (const auto& p : prompts) {
    Saved h;
    auto r = lm().trace(p, greedy(3), [&](Tracer&) { h = lm().envoy("model.layers.6").output().save(); });
    expected.push_back(r.output().token_ids);
    expected_h.push_back(r[h]);
  }
  std::atomic<int> mismatches{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) {
        const size_t i = static_cast<size_t>(t + k) % prompts.size();
        Saved h;
        auto r = lm().trace(prompts[i], greedy(3), [&](Tracer&) { h = lm().envoy("model.layers.6").output().save(); });
        if (r.output().token_ids != expected[i] || (r[h] - expected_h[i]).abs().max().item<double>() > 1e-4)
          ++mismatches;
        ++done;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(done.load(), 160);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(RealModelTracing, MultiProcessExecutorGivesTheSameSaves) {
  Saved a, b;
  auto body = [&](LanguageModel& m, Saved& s) {
    return [&m, &s](Tracer&) {
      auto mlp = m.envoy("model.layers.20.mlp");
      mlp.output() = mlp.output() * 0.5;
      s = m.envoy("model.layers.25").output().save();
    };
  };
  auto in = lm().trace(kEiffel, greedy(2), body(lm(), a));
  LanguageModel mp(EngineArgs().model(testing::default_model_path()).executor("mp").show_progress(false));
  auto out = mp.trace(kEiffel, greedy(2), body(mp, b));
  EXPECT_EQ(in.output().token_ids, out.output().token_ids);
  EXPECT_LE((in[a] - out[b]).abs().max().item<double>(), 1e-5);
}

// docs/envoys.md: containers are navigable, and a wrong child is reported at
// the user's line with the closest known path.
TEST(RealModelTracing, ContainersAreNavigableAndErrorsPointAtTheUsersLine) {
  Envoy layers = lm().envoy("model.layers");
  EXPECT_EQ(layers[5]["mlp"].path(), "model.layers.5.mlp");
  EXPECT_EQ(layers[5]["mlp"].type_name(), "LlamaMLP");
  Saved via_container, direct;
  auto out = lm().trace("Hello", SamplingParams().max_tokens(1), [&](Tracer&) {
    via_container = lm().envoy("model.layers")[5]["mlp"].output().save();
    direct = lm().envoy("model.layers.6.mlp").output().save();
  });
  EXPECT_EQ(out[via_container].size(1), 576);
  try {
    layers[5]["mpl"];
    FAIL() << "no module model.layers.5.mpl";
  } catch (const TraceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("real_model_tracing_test.cpp:" + std::to_string(__LINE__ - 4)), std::string::npos) << msg;
    EXPECT_NE(msg.find("did you mean 'model.layers.5.mlp'"), std::string::npos) << msg;
  }
}

TEST(RealModelTracing, ConfigIsReadableFromThePublicApi) {
  const ModelConfigInfo c = lm().config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_NEAR(c.norm_eps, 1e-5, 1e-9);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_experts, 0);
}

}  // namespace
}  // namespace nnsight
