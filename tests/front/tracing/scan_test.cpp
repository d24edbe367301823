// Scan (LanguageModel::scan, NNsight's model.scan) on a tiny random Llama
// served in process: it reports the shape and dtype a real trace of the same
// body saves -- module outputs and inputs, the attention pattern, logits, an
// arithmetic proxy, a later generation step -- without a forward (a forward
// hook on the served model counts them), and it refuses what a real trace
// refuses with the same message.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>

#include <nnsight/forward_hook.hpp>
#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

std::atomic<int64_t> g_forwards{0};

class Scan : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    register_hook_factory("scan_test", "count", [](const nlohmann::json&) -> ForwardHookFn {
      return [](const HookedModule&, const HookValue&, const HookValue&) -> std::optional<HookValue> {
        ++g_forwards;
        return std::nullopt;
      };
    });
    dir_ = new testing::ScratchDir();
    testing::write_hf_checkpoint(dir_->path(), *testing::tiny_llama());
    lm_ = new LanguageModel(EngineArgs()
                                .model(dir_->path())
                                .kv_cache_memory_mb(16)
                                .show_progress(false)
                                .forward_hooks(R"([{"name": "count", "target_modules": ["model.norm"],
                                                   "hook_factory": "scan_test:count"}])"));
  }
  static void TearDownTestSuite() {
    delete lm_;
    delete dir_;
  }
  static std::vector<int32_t> prompt(int seed, int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(3 + (seed * 17 + i * 11) % 90);
    return p;
  }
  static SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

  static testing::ScratchDir* dir_;
  static LanguageModel* lm_;
};
testing::ScratchDir* Scan::dir_ = nullptr;
LanguageModel* Scan::lm_ = nullptr;

void expect_same(const ScannedValue& scanned, const at::Tensor& real, const std::string& what) {
  ASSERT_TRUE(scanned.is_tensor) << what << ": " << scanned.describe();
  EXPECT_EQ(scanned.shape, real.sizes().vec()) << what << ": scanned " << scanned.describe();
  EXPECT_EQ(scanned.dtype, real.scalar_type()) << what << ": scanned " << scanned.describe();
}

TEST_F(Scan, ReportsTheShapesARealTraceSavesWithoutAForward) {
  const auto p = prompt(1, 7);
  Saved mlp_out, mlp_in, pattern, logits, arith, later, later_pattern;
  Proxy arith_proxy;
  auto body = [&](Tracer& t) {
    Envoy attn = lm_->envoy("model.layers.0.self_attn");
    pattern = attn["pattern"].output().save();
    Envoy mlp = lm_->envoy("model.layers.1.mlp");
    mlp_in = mlp.input().save();
    Proxy h = mlp.output();
    mlp_out = h.save();
    arith_proxy = (h * 2 + h.sum(-1, true)).softmax(-1)[{-1}];
    arith = arith_proxy.save();
    logits = lm_->logits().save();
    t.iter(1, 2, [&](const Step&) {
      later_pattern = attn["pattern"].output().save();
      later = lm_->envoy("model.layers.1").output().save();
    });
  };
  const int64_t before = g_forwards.load();
  ScanResult s = lm_->scan(p, greedy(3), body);
  EXPECT_EQ(g_forwards.load(), before) << "scan ran the model";
  // Indexed by proxy too.
  EXPECT_EQ(s[arith_proxy].shape, s[arith].shape);
  EXPECT_FALSE(s.str().empty());

  TraceResult r = lm_->trace(p, greedy(3), body);
  EXPECT_GT(g_forwards.load(), before) << "the counting hook saw no forward";
  expect_same(s[pattern], r[pattern], "pattern");
  expect_same(s[mlp_in], r[mlp_in], "mlp input");
  expect_same(s[mlp_out], r[mlp_out], "mlp output");
  expect_same(s[arith], r[arith], "arithmetic proxy");
  expect_same(s[logits], r[logits], "logits");
  expect_same(s[later], r[later], "layer output at step 1");
  expect_same(s[later_pattern], r[later_pattern], "pattern at step 1");
}

TEST_F(Scan, InvokesOfSeveralPromptsAndTuples) {
  const auto p = prompt(2, 5), q = prompt(3, 9);
  Saved both, attn_out, first;
  auto body = [&](Tracer& t) {
    t.invoke(std::vector<std::vector<int32_t>>{p, q}, [&] { both = lm_->envoy("model.layers.0").output().save(); });
    t.invoke(q, [&] {
      attn_out = lm_->envoy("model.layers.0.self_attn").output().save();
      first = lm_->logits().save();
    });
  };
  const int64_t before = g_forwards.load();
  ScanResult s = lm_->scan(greedy(1), body);
  EXPECT_EQ(g_forwards.load(), before);
  TraceResult r = lm_->trace(greedy(1), body);
  expect_same(s[both], r[both], "two prompts' rows");
  expect_same(s[first], r[first], "logits");
  // A tuple: (attn_output, None).
  const std::vector<at::Tensor> real = r.list(attn_out);
  ASSERT_EQ(s[attn_out].items.size(), real.size()) << s[attn_out].describe();
  for (size_t i = 0; i < real.size(); ++i) {
    EXPECT_EQ(s[attn_out].items[i].is_none, !real[i].defined());
    if (real[i].defined()) expect_same(s[attn_out].items[i], real[i], "tuple element");
  }
}

// The message of the TraceError `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

TEST_F(Scan, ErrorsAreARealTraceErrors) {
  const auto p = prompt(4, 6);
  const int64_t before = g_forwards.load();
  // An unknown path, with its suggestion.
  auto misspelt = [&](Tracer&) { lm_->envoy("model.layers.0.mpl").output().save(); };
  const std::string a = error_of([&] { lm_->scan(p, greedy(1), misspelt); });
  EXPECT_NE(a.find("did you mean 'model.layers.0.mlp'"), std::string::npos) << a;
  EXPECT_EQ(a, error_of([&] { lm_->trace(p, greedy(1), misspelt); }));
  // Out of order: layer 0 after layer 1 in the same step.
  auto backwards = [&](Tracer&) {
    lm_->envoy("model.layers.1").output().save();
    lm_->envoy("model.layers.0").output().save();
  };
  const std::string b = error_of([&] { lm_->scan(p, greedy(1), backwards); });
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(b, error_of([&] { lm_->trace(p, greedy(1), backwards); }));
  EXPECT_EQ(g_forwards.load(), before);
  // A write of the wrong shape: found by the scan without a forward, by the trace while it runs.
  auto wrong = [&](Tracer&) { lm_->envoy("model.layers.0.mlp").output() = at::ones({3}); };
  const std::string c = error_of([&] { lm_->scan(p, greedy(1), wrong); });
  EXPECT_EQ(g_forwards.load(), before);
  EXPECT_NE(c.find("shape mismatch: cannot set `model.layers.0.mlp.output` of this invoke (shape [6, 32]) to a "
                   "value of shape [3]"),
            std::string::npos)
      << c;
  const std::string real = error_of([&] { lm_->trace(p, greedy(1), wrong); });
  const std::string from_node = c.substr(c.find("node "));
  EXPECT_NE(real.find(from_node), std::string::npos) << "scan: " << c << "\ntrace: " << real;
  // An op on shapes that do not fit.
  auto mismatch = [&](Tracer&) { (lm_->envoy("model.layers.0.mlp").output() + at::ones({5})).save(); };
  const std::string d = error_of([&] { lm_->scan(p, greedy(1), mismatch); });
  EXPECT_FALSE(d.empty());
  const std::string real_d = error_of([&] { lm_->trace(p, greedy(1), mismatch); });
  EXPECT_NE(real_d.find(d.substr(d.find("node "), 40)), std::string::npos) << "scan: " << d << "\ntrace: " << real_d;
}

}  // namespace
}  // namespace nnsight
