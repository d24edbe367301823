// Gradients in a trace (proxy.grad() after metric.backward(), docs/gradients.md)
// on a tiny random Llama served in process: the gradients of module outputs
// equal plain autograd through the dense reference forward written in the
// tests (tests/support/tiny_models.cpp); the forward values of a gradient
// trace are bitwise those of the same trace without backward(); a plain
// request running beside a gradient trace is unchanged; misuse fails at the
// user's line.
#include <gtest/gtest.h>

#include <torch/csrc/autograd/autograd.h>

#include <nnsight/nnsight.hpp>

#include "front/trace_client/graph_file.h"
#include "front/trace_client/graph_trace.h"
#include "support/hf_fixtures.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_llama_suite.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

class Gradients : public testing::TinyLlamaSuite<Gradients> {
 protected:
  static SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
};

const std::vector<int32_t> kA = {5, 17, 33, 8, 61, 12, 40};
const std::vector<int32_t> kB = {9, 2, 44, 71};

// The largest |a - b| relative to the size of b (at least 1).
double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const double scale = std::max(1.0, b.abs().max().item<double>());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / scale;
}

// Gradients of logits[last, hi] - logits[last, lo] with respect to the named
// module outputs, by plain autograd through the dense reference forward.
std::map<std::string, at::Tensor> reference_grads(const std::vector<int32_t>& prompt, int64_t hi, int64_t lo,
                                                  const std::vector<std::string>& modules) {
  auto model = testing::tiny_llama();
  const auto params = testing::parameters_of(*model);
  std::vector<int64_t> tokens(prompt.begin(), prompt.end());
  std::map<std::string, at::Tensor> deltas;
  at::AutoGradMode on(true);
  auto tap = [&](const std::string& name, const at::Tensor& t) {
    if (std::find(modules.begin(), modules.end(), name) == modules.end()) return t;
    at::Tensor d = at::zeros_like(t).requires_grad_(true);
    deltas[name] = d;
    return t + d;
  };
  testing::DenseOutput out = testing::dense_reference(model->config(), params, tokens, tap);
  const int64_t last = out.logits.size(0) - 1;
  at::Tensor metric = out.logits[last][hi] - out.logits[last][lo];
  std::vector<at::Tensor> inputs;
  for (const auto& m : modules) inputs.push_back(deltas.at(m));
  auto grads = torch::autograd::grad({metric}, inputs);
  std::map<std::string, at::Tensor> result;
  for (size_t i = 0; i < modules.size(); ++i) result[modules[i]] = grads[i];
  return result;
}

TEST_F(Gradients, EqualPlainAutogradThroughTheReference) {
  Saved g_mlp, g_attn, g_layer, g_norm, metric_s;
  auto out = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(kA, [&] {
      auto mlp = lm_->envoy("model.layers.0.mlp").output();            // a tensor
      auto attn = lm_->envoy("model.layers.1.self_attn").output()[0];  // element 0 of (attn_output, None)
      auto layer = lm_->envoy("model.layers.1").output();
      auto norm = lm_->envoy("model.norm").output();
      auto logits = lm_->logits();
      auto metric = logits[{0, 7}] - logits[{0, 3}];
      metric.backward();
      g_mlp = mlp.grad().save();
      g_attn = attn.grad().save();
      g_layer = layer.grad().save();
      g_norm = norm.grad().save();
      metric_s = metric.save();
    });
  });
  const auto ref =
      reference_grads(kA, 7, 3, {"model.layers.0.mlp", "model.layers.1.self_attn", "model.layers.1", "model.norm"});
  EXPECT_LT(rel_diff(out[g_mlp], ref.at("model.layers.0.mlp")), 1e-5);
  EXPECT_LT(rel_diff(out[g_attn], ref.at("model.layers.1.self_attn")), 1e-5);
  EXPECT_LT(rel_diff(out[g_layer], ref.at("model.layers.1")), 1e-5);
  EXPECT_LT(rel_diff(out[g_norm], ref.at("model.norm")), 1e-5);
  // Not trivially zero: every position before the last influences it through attention.
  EXPECT_GT(out[g_mlp][0].abs().max().item<double>(), 1e-4);
  // Only the last position's final norm output feeds the last logits.
  EXPECT_EQ(out[g_norm].narrow(0, 0, 6).abs().max().item<double>(), 0.0);
  EXPECT_FALSE(out[metric_s].requires_grad());
}

// Through a multimodal checkpoint's base (Gemma3Model around its language
// model, docs/weights.md): the gradient of logits[last, 7] - logits[last, 3]
// at the final norm's output is exactly lm_head.weight[7] - [3] at the last
// position (the logits are that output times the tied head; no soft-cap in
// the fixture) and zero before it; it reaches the layers below.
TEST(GradientsMultimodal, FlowThroughTheLanguageModelBase) {
  LanguageModel lm(EngineArgs()
                       .model(testing::hf_fixture_dir(testing::HfFixtureCase{5, "gemma3"}))
                       .kv_cache_memory_mb(16)
                       .show_progress(false));
  Saved g_norm, g_layer;
  const std::vector<int32_t> prompt = {46, 171, 95, 284, 106};
  const at::Tensor w = lm.parameter("lm_head.weight");  // [vocab, hidden], the tied embedding
  const auto out = lm.trace(SamplingParams().temperature(0).max_tokens(1), [&](Tracer& t) {
    t.invoke(prompt, [&] {
      auto layer = lm.envoy("model.language_model.layers.0").output();
      auto norm = lm.envoy("model.language_model.norm").output();
      auto logits = lm.logits();
      auto metric = logits[{0, 7}] - logits[{0, 3}];
      metric.backward();
      g_layer = layer.grad().save();
      g_norm = norm.grad().save();
    });
  });
  const at::Tensor gn = out[g_norm];  // [5, hidden]
  ASSERT_EQ(gn.size(0), 5);
  EXPECT_LT((gn[4] - (w[7] - w[3])).abs().max().item<double>(), 1e-6);
  EXPECT_EQ(gn.narrow(0, 0, 4).abs().max().item<double>(), 0.0);
  EXPECT_GT(out[g_layer].abs().max().item<double>(), 1e-4);
}

TEST_F(Gradients, ForwardValuesEqualTheTraceWithoutBackward) {
  Saved h_grad, logits_grad, g;
  auto with = lm_->trace(greedy(3), [&](Tracer& t) {
    t.invoke(kA, [&] {
      auto h = lm_->envoy("model.layers.1.mlp").output();
      auto logits = lm_->logits();
      h_grad = h.save();
      logits_grad = logits.save();
      logits.log_softmax(-1)[{0, 11}].backward();
      g = h.grad().save();
    });
  });
  Saved h_plain, logits_plain;
  auto without = lm_->trace(greedy(3), [&](Tracer& t) {
    t.invoke(kA, [&] {
      h_plain = lm_->envoy("model.layers.1.mlp").output().save();
      logits_plain = lm_->logits().save();
    });
  });
  EXPECT_TRUE(at::equal(with[h_grad], without[h_plain]));
  EXPECT_TRUE(at::equal(with[logits_grad], without[logits_plain]));
  // Later steps run (with autograd) and generate the same tokens.
  EXPECT_EQ(with.output().token_ids, without.output().token_ids);
  EXPECT_EQ(with[g].sizes(), with[h_grad].sizes());
}

TEST_F(Gradients, EachInvokeGetsItsOwnRowsGradient) {
  // Invoke 1 backpropagates a metric of its own logits; its gradient equals
  // the same invoke traced alone, and invoke 0 beside it is unchanged.
  Saved l0, g1;
  auto both = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(kA, [&] { l0 = lm_->logits().save(); });
    t.invoke(kB, [&] {
      auto h = lm_->envoy("model.layers.0.mlp").output();
      lm_->logits()[{0, 5}].backward();
      g1 = h.grad().save();
    });
  });
  Saved alone;
  auto one = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(kB, [&] {
      auto h = lm_->envoy("model.layers.0.mlp").output();
      lm_->logits()[{0, 5}].backward();
      alone = h.grad().save();
    });
  });
  EXPECT_LT(rel_diff(both[g1], one[alone]), 1e-6);
  EXPECT_EQ(both[g1].size(0), static_cast<int64_t>(kB.size()));
  Saved a_alone;
  auto a = lm_->trace(greedy(1), [&](Tracer& t) { t.invoke(kA, [&] { a_alone = lm_->logits().save(); }); });
  EXPECT_TRUE(at::equal(both[l0], a[a_alone]));
}

TEST_F(Gradients, PlainRequestBesideAGradientTraceIsUnchanged) {
  auto plain_body = [&](Saved& logits, Saved& h) {
    return [&](Tracer& t) {
      t.invoke(kB, [&] {
        h = lm_->envoy("model.layers.1").output().save();
        logits = lm_->logits().save();
      });
    };
  };
  Saved alone_logits, alone_h;
  TraceResult alone = lm_->trace(greedy(4), plain_body(alone_logits, alone_h));

  Saved g;
  Saved beside_logits, beside_h;
  TraceFuture grad_trace = lm_->submit(greedy(4), [&](Tracer& t) {
    t.invoke(kA, [&] {
      auto h = lm_->envoy("model.layers.0").output();
      lm_->logits()[{0, 9}].backward();
      g = h.grad().save();
    });
  });
  TraceFuture plain = lm_->submit(greedy(4), plain_body(beside_logits, beside_h));
  TraceResult p = plain.get();
  TraceResult gr = grad_trace.get();
  EXPECT_TRUE(at::equal(p[beside_logits], alone[alone_logits]));
  EXPECT_TRUE(at::equal(p[beside_h], alone[alone_h]));
  EXPECT_EQ(p.output().token_ids, alone.output().token_ids);
  EXPECT_EQ(gr[g].size(0), static_cast<int64_t>(kA.size()));
}

TEST_F(Gradients, WorkerProcessesGiveTheSameGradientsAndTensorParallelIsRefused) {
  auto body = [&](LanguageModel& lm, Saved& g, Saved& logits) {
    return [&](Tracer& t) {
      t.invoke(kA, [&] {
        auto h = lm.envoy("model.layers.0.mlp").output();
        auto l = lm.logits();
        logits = l.save();
        l.log_softmax(-1)[{0, 4}].backward();
        g = h.grad().save();
      });
    };
  };
  Saved g_in, l_in;
  auto in = lm_->trace(greedy(2), body(*lm_, g_in, l_in));
  // Worker processes hold the weights and the KV cache as inference tensors.
  const EngineArgs args = EngineArgs().model(dir_->path()).kv_cache_memory_mb(16).show_progress(false);
  {
    LanguageModel mp(EngineArgs(args).executor("mp"));
    Saved g_mp, l_mp;
    auto out = mp.trace(greedy(2), body(mp, g_mp, l_mp));
    EXPECT_TRUE(at::equal(out[l_mp], in[l_in]));
    EXPECT_LT(rel_diff(out[g_mp], in[g_in]), 1e-6);
    EXPECT_EQ(out.output().token_ids, in.output().token_ids);
  }
  // A model whose sizes split over two ranks.
  testing::ScratchDir tp_dir;
  testing::write_hf_checkpoint(tp_dir.path(), *testing::tiny_random_model(testing::tiny_tp_llama_config(), 3));
  LanguageModel tp(EngineArgs()
                       .model(tp_dir.path())
                       .kv_cache_memory_mb(16)
                       .show_progress(false)
                       .executor("mp")
                       .tensor_parallel_size(2)
                       .worker_timeout_s(60));
  Saved g_tp, l_tp;
  const std::string e = error_of([&] { tp.trace(greedy(1), body(tp, g_tp, l_tp)); });
  EXPECT_NE(e.find("gradients (backward()) need tensor_parallel_size 1"), std::string::npos) << e;
}

TEST_F(Gradients, Gpt2LayerNormsAndFusedProjectionsRecordToo) {
  testing::ScratchDir dir;
  testing::write_hf_checkpoint(dir.path(), *testing::tiny_random_model(testing::tiny_gpt2_config(), 5));
  LanguageModel gpt2(EngineArgs().model(dir.path()).kv_cache_memory_mb(16).show_progress(false).executor("mp"));
  Saved g, h1, h2;
  auto with = gpt2.trace(greedy(2), [&](Tracer& t) {
    t.invoke(kB, [&] {
      auto h = gpt2.envoy("transformer.h.0.mlp").output();
      h1 = h.save();
      gpt2.logits()[{0, 3}].backward();
      g = h.grad().save();
    });
  });
  auto without = gpt2.trace(
      greedy(2), [&](Tracer& t) { t.invoke(kB, [&] { h2 = gpt2.envoy("transformer.h.0.mlp").output().save(); }); });
  EXPECT_TRUE(at::equal(with[h1], without[h2]));
  EXPECT_EQ(with.output().token_ids, without.output().token_ids);
  // Every position reaches the last one's logits through attention.
  EXPECT_GT(with[g].abs().amax(1).min().item<double>(), 0.0);
}

TEST_F(Gradients, JsonGraphGivesTheSameGradients) {
  // docs/gradients.md's JSON form, as `nnsight trace` and the server take it.
  const char* graph = R"({"invoke": 0, "nodes": [
    {"id": 0, "kind": "get", "key": "model.layers.1.output", "step": 0},
    {"id": 1, "kind": "get", "key": "logits", "step": 0},
    {"id": 2, "kind": "const", "value": {"index": [0, 7]}},
    {"id": 3, "kind": "op", "op": "getitem", "args": [1, 2]},
    {"id": 4, "kind": "backward", "args": [3]},
    {"id": 5, "kind": "grad", "args": [0]},
    {"id": 6, "kind": "save", "name": "grad1", "args": [5]}
  ]})";
  TraceResult json = tracing::run_graph_trace(lm_->llm(), std::vector<std::vector<int32_t>>{kA},
                                              {tracing::parse_graph_file("g.json", graph)}, greedy(1));
  Saved g;
  TraceResult cpp = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(kA, [&] {
      auto h = lm_->envoy("model.layers.1").output();
      lm_->logits()[{0, 7}].backward();
      g = h.grad().save();
    });
  });
  EXPECT_TRUE(at::equal(json[Saved("grad1")], cpp[g]));
}

TEST_F(Gradients, MisuseFailsAtTheUsersLine) {
  // grad() before any backward(): rejected before the run, at its line.
  std::string e = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      t.invoke(kA, [&] {
        auto h = lm_->envoy("model.layers.0.mlp").output();
        h.grad().save();  // line A
        lm_->logits().sum().backward();
      });
    });
  });
  EXPECT_NE(e.find("gradients_test.cpp"), std::string::npos) << e;
  EXPECT_NE(e.find("before any backward()"), std::string::npos) << e;
  // grad() of a computed value.
  e = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      t.invoke(kA, [&] {
        auto h = lm_->envoy("model.layers.0.mlp").output() * 2;
        lm_->logits().sum().backward();
        h.grad().save();
      });
    });
  });
  EXPECT_NE(e.find("grad() is taken of a value read from the model"), std::string::npos) << e;
  // grad() of an index into a tensor output: refused before the model runs
  // (the mlp's output is a tensor, not a tuple), at its line, with the form that works.
  const unsigned line = __LINE__ + 6;
  e = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      t.invoke(kA, [&] {
        auto h = lm_->envoy("model.layers.0.mlp").output();
        lm_->logits().sum().backward();
        h[{-1}].grad().save();
      });
    });
  });
  EXPECT_NE(e.find("gradients_test.cpp:" + std::to_string(line)), std::string::npos) << e;
  EXPECT_NE(e.find("h.grad()[{-1}], not h[{-1}].grad()"), std::string::npos) << e;
  // backward() of a tensor with more than one element: fails at run time with its node.
  e = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      t.invoke(kA, [&] {
        auto h = lm_->envoy("model.layers.0.mlp").output();
        lm_->logits().backward();
        h.grad().save();
      });
    });
  });
  EXPECT_NE(e.find("one-element tensor"), std::string::npos) << e;
  EXPECT_NE(e.find("gradients_test.cpp"), std::string::npos) << e;
  // The engine keeps serving.
  Saved ok;
  auto r = lm_->trace(greedy(1), [&](Tracer& t) { t.invoke(kB, [&] { ok = lm_->logits().save(); }); });
  EXPECT_EQ(r[ok].size(0), 1);
}

}  // namespace
}  // namespace nnsight
