// Persistent edits (LanguageModel::edit, NNsight's model.edit) on a tiny
// random Llama served in process: an edit runs in every later trace and
// generate of the model it made, before the trace's own interventions, until
// clear_edits(); the model it was made from stays unedited. The reference
// for every edited value is the same intervention written inline in a plain
// trace (bitwise equal: the same kernels on the same rows).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_llama_suite.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

class PersistentEdits : public testing::TinyLlamaSuite<PersistentEdits> {
 protected:
  void TearDown() override { lm_->clear_edits(); }

  static std::vector<int32_t> prompt(int seed, int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(3 + (seed * 17 + i * 11) % 90);
    return p;
  }
  static SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

  // The edit every test makes: layer 0's MLP output doubled (at the prefill step).
  static void double_mlp() {
    Envoy mlp = lm_->envoy("model.layers.0.mlp");
    mlp.output() = mlp.output() * 2;
  }
  // Layer 1's output of `p` in a plain trace, with `body` recorded first.
  static at::Tensor layer1(LanguageModel& lm, const std::vector<int32_t>& p, const std::function<void()>& body) {
    Saved h;
    TraceResult r = lm.trace(p, greedy(1), [&](Tracer&) {
      if (body) body();
      h = lm_->envoy("model.layers.1").output().save();
    });
    return r[h];
  }
};

TEST_F(PersistentEdits, PersistAcrossTracesAndGenerateAndLeaveTheOriginalUnedited) {
  LanguageModel edited = lm_->edit([](Tracer&) { double_mlp(); });
  EXPECT_EQ(edited.num_edits(), 1u);
  EXPECT_EQ(lm_->num_edits(), 0u);
  for (int seed : {1, 2}) {
    const auto p = prompt(seed, 6 + seed);
    const at::Tensor under_edit = layer1(edited, p, nullptr);
    const at::Tensor inline_edit = layer1(*lm_, p, [] { double_mlp(); });
    const at::Tensor plain = layer1(*lm_, p, nullptr);
    EXPECT_TRUE(at::equal(under_edit, inline_edit)) << "trace " << seed;
    EXPECT_FALSE(at::equal(under_edit, plain)) << "the edit changed nothing";
  }
  // generate: the edit's prefill-step write reaches the sampled tokens.
  const auto p = prompt(3, 5);
  Saved l_edit, l_inline;
  TraceResult g_edit =
      edited.generate(greedy(4), [&](Tracer& t) { t.invoke(p, [&] { l_edit = lm_->logits().save(); }); });
  TraceResult g_inline = lm_->generate(greedy(4), [&](Tracer& t) {
    t.invoke(p, [&] {
      double_mlp();
      l_inline = lm_->logits().save();
    });
  });
  EXPECT_TRUE(at::equal(g_edit[l_edit], g_inline[l_inline]));
  EXPECT_EQ(g_edit.output().token_ids, g_inline.output().token_ids);
  // The model it was made from is untouched, and so is a second copy's base.
  Saved l_plain;
  TraceResult g_plain = lm_->trace(p, greedy(1), [&](Tracer&) { l_plain = lm_->logits().save(); });
  EXPECT_FALSE(at::equal(g_plain[l_plain], g_edit[l_edit]));
  LanguageModel twice = edited.edit([](Tracer&) { double_mlp(); });
  EXPECT_EQ(twice.num_edits(), 2u);
  EXPECT_EQ(edited.num_edits(), 1u);
  EXPECT_TRUE(at::equal(layer1(twice, p, nullptr), layer1(*lm_, p, [] {
                          double_mlp();
                          double_mlp();
                        })));
}

TEST_F(PersistentEdits, StackWithTheTraceOwnWriteEditFirst) {
  lm_->edit_inplace([](Tracer&) { double_mlp(); });
  const auto p = prompt(4, 7);
  Saved seen, h;
  TraceResult r = lm_->trace(p, greedy(1), [&](Tracer&) {
    Envoy mlp = lm_->envoy("model.layers.0.mlp");
    seen = mlp.output().save();
    mlp.output() = mlp.output() + 1;
    h = lm_->envoy("model.layers.1").output().save();
  });
  lm_->clear_edits();
  Saved x;
  TraceResult plain = lm_->trace(p, greedy(1), [&](Tracer&) { x = lm_->envoy("model.layers.0.mlp").output().save(); });
  // The trace reads the edited value: the edit ran first.
  EXPECT_TRUE(at::equal(r[seen], plain[x] * 2));
  // Both writes landed, the edit's first: 2x + 1, not 2(x + 1).
  const at::Tensor edit_then_trace = layer1(*lm_, p, [] {
    Envoy mlp = lm_->envoy("model.layers.0.mlp");
    mlp.output() = mlp.output() * 2 + 1;
  });
  const at::Tensor trace_then_edit = layer1(*lm_, p, [] {
    Envoy mlp = lm_->envoy("model.layers.0.mlp");
    mlp.output() = (mlp.output() + 1) * 2;
  });
  EXPECT_TRUE(at::equal(r[h], edit_then_trace));
  EXPECT_FALSE(at::equal(r[h], trace_then_edit));
}

TEST_F(PersistentEdits, ClearEditsRemovesThem) {
  const auto p = prompt(5, 6);
  const at::Tensor plain = layer1(*lm_, p, nullptr);
  lm_->edit_inplace([](Tracer&) { double_mlp(); });
  EXPECT_EQ(lm_->num_edits(), 1u);
  EXPECT_FALSE(at::equal(layer1(*lm_, p, nullptr), plain));
  lm_->clear_edits();
  EXPECT_EQ(lm_->num_edits(), 0u);
  EXPECT_TRUE(at::equal(layer1(*lm_, p, nullptr), plain));
}

TEST_F(PersistentEdits, AnEditOverEveryStepSteersGeneration) {
  auto ablate_each_step = [](Tracer& t) {
    t.all([](const Step&) {
      Envoy mlp = lm_->envoy("model.layers.1.mlp");
      mlp.output() = mlp.output() * 0;
    });
  };
  LanguageModel edited = lm_->edit(ablate_each_step);
  const auto p = prompt(6, 5);
  TraceResult a = edited.trace(p, greedy(6), [](Tracer&) {});
  TraceResult b = lm_->trace(p, greedy(6), ablate_each_step);
  TraceResult c = lm_->trace(p, greedy(6), [](Tracer&) {});
  EXPECT_EQ(a.output().token_ids, b.output().token_ids);
  EXPECT_NE(a.output().token_ids, c.output().token_ids);
}

TEST_F(PersistentEdits, EveryInvokeOfATraceIsEdited) {
  LanguageModel edited = lm_->edit([](Tracer&) { double_mlp(); });
  const auto p = prompt(7, 5), q = prompt(8, 8);
  Saved hp, hq;
  TraceResult r = edited.trace(greedy(1), [&](Tracer& t) {
    t.invoke(p, [&] { hp = lm_->envoy("model.layers.1").output().save(); });
    t.invoke(q, [&] { hq = lm_->envoy("model.layers.1").output().save(); });
  });
  EXPECT_TRUE(at::equal(r[hp], layer1(*lm_, p, [] { double_mlp(); })));
  EXPECT_TRUE(at::equal(r[hq], layer1(*lm_, q, [] { double_mlp(); })));
}

TEST_F(PersistentEdits, StaticErrorsAreThrownWhereTheEditIsMade) {
  try {
    lm_->edit([](Tracer&) { lm_->envoy("model.layers.0.mpl").output() = 0; });
    FAIL() << "an unknown path must be refused";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'model.layers.0.mlp'"), std::string::npos) << e.what();
  }
  try {
    lm_->edit([](Tracer&) { lm_->envoy("model.layers.0").output().save(); });
    FAIL() << "an edit that saves must be refused";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot save: save in the trace instead"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lm_->num_edits(), 0u);
}

}  // namespace
}  // namespace nnsight
