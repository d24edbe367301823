// Invokes with several prompts (tracer.invoke({...}, body), docs/invokes.md)
// on a tiny random Llama served in process: one graph over its prompts' rows,
// equal to one-prompt invokes; prompts finishing at different steps; writes
// reaching every prompt and no other invoke; errors at the user's line; JSON
// graphs naming their "prompts" through run_graph_trace.
#include <gtest/gtest.h>

#include <algorithm>

#include <nnsight/nnsight.hpp>

#include "front/trace_client/graph_trace.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_llama_suite.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

class MultiPromptInvoke : public testing::TinyLlamaSuite<MultiPromptInvoke> {
 protected:
  static SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const TraceError& e) {
      return e.what();
    }
    return "";
  }
};

const std::vector<int32_t> kA = {5, 17, 33, 8, 61, 12, 40};
const std::vector<int32_t> kB = {9, 2, 44, 71};

TEST_F(MultiPromptInvoke, EqualsOnePromptInvokes) {
  Saved both_logits, both_h, both_samples;
  auto both = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke({kA, kB}, [&] {
      both_h = lm_->envoy("model.layers.1").output().save();
      both_logits = lm_->logits().save();
      both_samples = lm_->samples().save();
    });
  });
  Saved a_logits, b_logits, a_h, b_h;
  auto apart = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(kA, [&] {
      a_h = lm_->envoy("model.layers.1").output().save();
      a_logits = lm_->logits().save();
    });
    t.invoke(kB, [&] {
      b_h = lm_->envoy("model.layers.1").output().save();
      b_logits = lm_->logits().save();
    });
  });
  // Token level: the prompts' rows in prompt order; logits and samples: one row per prompt.
  ASSERT_EQ(both[both_h].sizes(), (std::vector<int64_t>{11, 32}));
  ASSERT_EQ(both[both_logits].sizes(), (std::vector<int64_t>{2, 97}));
  ASSERT_EQ(both[both_samples].sizes(), (std::vector<int64_t>{2}));
  // The engine is batch invariant on CPU: bit-equal.
  EXPECT_TRUE(at::equal(both[both_logits], at::cat({apart[a_logits], apart[b_logits]})));
  EXPECT_TRUE(at::equal(both[both_h], at::cat({apart[a_h], apart[b_h]})));
  // One output per prompt, in order.
  ASSERT_EQ(both.outputs().size(), 2u);
  EXPECT_EQ(both.output(0).token_ids, apart.output(0).token_ids);
  EXPECT_EQ(both.output(1).token_ids, apart.output(1).token_ids);
  EXPECT_EQ(both[both_samples][0].item<int64_t>(), both.output(0).token_ids[0]);
  EXPECT_EQ(both[both_samples][1].item<int64_t>(), both.output(1).token_ids[0]);
}

TEST_F(MultiPromptInvoke, AListOfOneIsAPlainInvoke) {
  Saved one, plain;
  auto a = lm_->trace(greedy(2), [&](Tracer& t) { t.invoke({kA}, [&] { one = lm_->logits().save(); }); });
  auto b = lm_->trace(greedy(2), [&](Tracer& t) { t.invoke(kA, [&] { plain = lm_->logits().save(); }); });
  EXPECT_TRUE(at::equal(a[one], b[plain]));
  EXPECT_EQ(a.output().token_ids, b.output().token_ids);
}

TEST_F(MultiPromptInvoke, PromptsFinishAtTheirOwnSteps) {
  // Alone, each prompt generates 6 tokens; a stop token that only A produces
  // (at step j) ends A there while B runs on.
  std::vector<int32_t> a, b;
  for (auto* p : {&kA, &kB}) {
    auto out = lm_->trace(*p, greedy(6), [&](Tracer&) {});
    (p == &kA ? a : b) = out.output().token_ids;
  }
  size_t j = 0;
  for (size_t i = 1; i + 1 < a.size() && j == 0; ++i)
    if (std::find(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(i), a[i]) == a.begin() + static_cast<int64_t>(i) &&
        std::find(b.begin(), b.end(), a[i]) == b.end())
      j = i;
  ASSERT_GT(j, 0u) << "no token of A's generation stops A alone; pick other prompts";
  const int32_t stop = a[j];

  Saved samples, logits, layer, iterated;
  auto out = lm_->trace(greedy(6).stop_token_ids({stop}), [&](Tracer& t) {
    t.invoke({kA, kB}, [&] {
      t.all([&](const Step&) {
        layer = lm_->envoy("model.layers.0").output().save_each();
        logits = lm_->logits().save_each();
        samples = lm_->samples().save_each();
      });
    });
  });
  ASSERT_EQ(out.outputs().size(), 2u);
  EXPECT_EQ(out.output(0).token_ids, std::vector<int32_t>(a.begin(), a.begin() + static_cast<int64_t>(j) + 1));
  EXPECT_EQ(out.output(0).finish_reason, FinishReason::kStop);
  EXPECT_EQ(out.output(1).token_ids, b);
  // all() runs until the last prompt ends; a step's value holds the rows of
  // the prompts still running at that step.
  auto s = out.list(samples);
  auto l = out.list(logits);
  auto h = out.list(layer);
  ASSERT_EQ(s.size(), 6u);
  ASSERT_EQ(l.size(), 6u);
  ASSERT_EQ(h.size(), 6u);
  EXPECT_EQ(h[0].size(0), static_cast<int64_t>(kA.size() + kB.size()));
  for (size_t i = 0; i < 6; ++i) {
    const bool a_runs = i <= j;
    ASSERT_EQ(s[i].size(0), a_runs ? 2 : 1) << "step " << i;
    EXPECT_EQ(l[i].size(0), a_runs ? 2 : 1);
    if (i > 0) {
      EXPECT_EQ(h[i].size(0), a_runs ? 2 : 1);
    }
    if (a_runs) {
      EXPECT_EQ(s[i][0].item<int64_t>(), a[i]);
    }
    EXPECT_EQ(s[i][a_runs ? 1 : 0].item<int64_t>(), b[i]) << "step " << i;
    EXPECT_EQ(l[i][a_runs ? 1 : 0].argmax().item<int64_t>(), b[i]);
  }

  // iter over steps only B reaches: its rows alone; over steps none reaches: an error.
  auto late = lm_->trace(greedy(6).stop_token_ids({stop}), [&](Tracer& t) {
    t.invoke({kA, kB}, [&] {
      t.iter(static_cast<int64_t>(j) + 1, 6, [&](const Step&) { iterated = lm_->samples().save_each(); });
    });
  });
  ASSERT_EQ(late.list(iterated).size(), 5 - j);
  EXPECT_EQ(late.list(iterated).back().item<int64_t>(), b.back());
  std::string msg = error_of([&] {
    lm_->trace(greedy(6).stop_token_ids({stop}), [&](Tracer& t) {
      t.invoke({kA, kB}, [&] { t.iter(0, 8, [&](const Step&) { iterated = lm_->samples().save_each(); }); });
    });
  });
  EXPECT_NE(msg.find("finished before step 6"), std::string::npos) << msg;
}

TEST_F(MultiPromptInvoke, WritesReachEveryPromptAndNoOtherInvoke) {
  auto zero_mlp = [&] {
    auto mlp = lm_->envoy("model.layers.0.mlp");
    mlp.output() = mlp.output() * 0;
  };
  Saved both, clean, zeroed;
  auto out = lm_->trace(greedy(3), [&](Tracer& t) {
    t.invoke({kA, kB}, [&] {
      zero_mlp();
      zeroed = lm_->envoy("model.layers.0.mlp").output().save();
      both = lm_->logits().save();
    });
    t.invoke(kA, [&] { clean = lm_->logits().save(); });
  });
  Saved a, b, alone;
  auto apart = lm_->trace(greedy(3), [&](Tracer& t) {
    t.invoke(kA, [&] {
      zero_mlp();
      a = lm_->logits().save();
    });
    t.invoke(kB, [&] {
      zero_mlp();
      b = lm_->logits().save();
    });
  });
  auto plain = lm_->trace(kA, greedy(3), [&](Tracer&) { alone = lm_->logits().save(); });
  EXPECT_EQ(out[zeroed].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(out[zeroed].size(0), static_cast<int64_t>(kA.size() + kB.size()));
  EXPECT_TRUE(at::equal(out[both], at::cat({apart[a], apart[b]})));
  EXPECT_TRUE(at::equal(out[clean], plain[alone]));
  EXPECT_FALSE(at::equal(out[both][0], plain[alone][0]));
  EXPECT_EQ(out.output(0).token_ids, apart.output(0).token_ids);
  EXPECT_EQ(out.output(1).token_ids, apart.output(1).token_ids);
  EXPECT_EQ(out.output(2).token_ids, plain.output().token_ids);
}

TEST_F(MultiPromptInvoke, PerPromptRowsWrittenFromAValueOfTheInvoke) {
  // An indexed write over the concatenated rows: only B's rows (the last
  // four) of layer 0's output are zeroed; A matches a clean run.
  Saved h, clean;
  auto out = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke({kA, kB}, [&] {
      auto layer = lm_->envoy("model.layers.0");
      layer.output()[{Slice(7, {})}] = 0;
      h = lm_->logits().save();
    });
  });
  Saved b_zeroed;
  auto plain = lm_->trace(greedy(1), [&](Tracer& t) {
    t.invoke(kA, [&] { clean = lm_->logits().save(); });
    t.invoke(kB, [&] {
      lm_->envoy("model.layers.0").output()[{Slice()}] = 0;
      b_zeroed = lm_->logits().save();
    });
  });
  EXPECT_TRUE(at::equal(out[h][0], plain[clean][0]));
  EXPECT_TRUE(at::equal(out[h][1], plain[b_zeroed][0]));
}

TEST_F(MultiPromptInvoke, ResultStopAndPromptlessInvokes) {
  Saved first, result, all_rows;
  auto out = lm_->trace(greedy(3), [&](Tracer& t) {
    t.invoke({kA, kB}, [&] {
      first = lm_->samples().save();
      t.stop();  // after step 0 (the rest of the body does not run)
    });
    t.invoke(kB, [] {});
    t.invoke([&] { all_rows = lm_->envoy("model.layers.0").output().save(); });
  });
  // stop() ends every prompt of the invoke; the other invoke runs on.
  EXPECT_EQ(out.output(0).token_ids.size(), 1u);
  EXPECT_EQ(out.output(1).token_ids.size(), 1u);
  EXPECT_EQ(out.output(2).token_ids.size(), 3u);
  EXPECT_EQ(out[first].size(0), 2);
  // An invoke without a prompt sees every prompt of the trace.
  EXPECT_EQ(out[all_rows].size(0), static_cast<int64_t>(kA.size() + 2 * kB.size()));
  // The result is one tensor of generated ids per prompt, once the last ends.
  auto done = lm_->trace(greedy(3), [&](Tracer& t) { t.invoke({kA, kB}, [&] { result = t.result().save(); }); });
  auto r = done.list(result);
  ASSERT_EQ(r.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& ids = done.output(i).token_ids;
    EXPECT_TRUE(at::equal(r[i], at::tensor(std::vector<int64_t>(ids.begin(), ids.end()))));
  }
}

TEST_F(MultiPromptInvoke, CacheAndACrossInvokeValue) {
  // tracer.cache() in an invoke with several prompts records all its prompts'
  // rows; its value used in a later invoke is the concatenation.
  CacheHandle c;
  Saved seen, own;
  auto out = lm_->trace(greedy(2), [&](Tracer& t) {
    Proxy h;
    t.invoke({kA, kB}, [&] {
      c = t.cache({"model.layers.1"});
      h = lm_->envoy("model.layers.0").output();
      own = h.save();
    });
    t.invoke(kB, [&] {
      auto x = lm_->envoy("model.layers.1").output();
      seen = (h.sum() + x.sum() * 0).save();
    });
  });
  auto layers = out.cache(c).at("model.layers.1");
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].size(0), static_cast<int64_t>(kA.size() + kB.size()));
  EXPECT_EQ(layers[1].size(0), 2);
  EXPECT_TRUE(at::allclose(out[seen], out[own].sum()));
}

TEST_F(MultiPromptInvoke, EmptyListsAndPromptsAreRefusedAtTheUsersLine) {
  const std::string file = "multi_prompt_invoke_test.cpp:";
  int line = 0;
  std::string msg = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      // clang-format off
      line = __LINE__; t.invoke(std::vector<std::string>{}, [] {});
      // clang-format on
    });
  });
  EXPECT_NE(msg.find(file + std::to_string(line) + ": an invoke's list of prompts is empty"), std::string::npos) << msg;
  msg = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      // clang-format off
      line = __LINE__; t.invoke({"a prompt", ""}, [] {});
      // clang-format on
    });
  });
  EXPECT_NE(msg.find(file + std::to_string(line) + ": prompt 1 of the invoke's 2 prompts is empty"), std::string::npos)
      << msg;
  msg = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      // clang-format off
      line = __LINE__; t.invoke({kA, {}}, [] {});
      // clang-format on
    });
  });
  EXPECT_NE(msg.find(file + std::to_string(line) + ": prompt 1 of the invoke's 2 token-id prompts is empty"),
            std::string::npos)
      << msg;
  msg = error_of([&] {
    lm_->trace(greedy(1), [&](Tracer& t) {
      // clang-format off
      line = __LINE__; t.invoke(std::vector<std::vector<int32_t>>{}, greedy(2), [] {});
      // clang-format on
    });
  });
  EXPECT_NE(msg.find(file + std::to_string(line) + ": an invoke's list of token-id prompts is empty"),
            std::string::npos)
      << msg;
}

// Ablates layer 0's MLP; saves layer 1's output and the logits, over prompts 0 and 1.
const char* kAblateBoth = R"({"format": "nnsight.graph", "version": 1, "prompts": [0, 1], "nodes": [
  {"kind": "get", "key": "model.layers.0.mlp.output"},
  {"kind": "const", "value": 0},
  {"kind": "op", "op": "mul", "args": [0, 1]},
  {"kind": "set", "key": "model.layers.0.mlp.output", "args": [2]},
  {"kind": "get", "key": "model.layers.1.output"},
  {"kind": "save", "name": "h", "args": [4]},
  {"kind": "get", "key": "logits"},
  {"kind": "save", "name": "logits", "args": [6]}
]})";

TEST_F(MultiPromptInvoke, JsonGraphNamingItsPrompts) {
  using tracing::parse_graph_file;
  using tracing::run_graph_trace;
  TraceResult json = run_graph_trace(lm_->llm(), {kA, kB}, {parse_graph_file("g.json", kAblateBoth)}, greedy(2));
  Saved h, logits;
  TraceResult cpp = lm_->trace(greedy(2), [&](Tracer& t) {
    t.invoke({kA, kB}, [&] {
      auto mlp = lm_->envoy("model.layers.0.mlp");
      mlp.output() = mlp.output() * 0;
      h = lm_->envoy("model.layers.1").output().save();
      logits = lm_->logits().save();
    });
  });
  ASSERT_EQ(json.saves().size(), 2u);
  EXPECT_TRUE(at::equal(json[Saved("h")], cpp[h]));
  EXPECT_TRUE(at::equal(json[Saved("logits")], cpp[logits]));
  ASSERT_EQ(json.outputs().size(), 2u);
  EXPECT_EQ(json.output(0).token_ids, cpp.output(0).token_ids);
  EXPECT_EQ(json.output(1).token_ids, cpp.output(1).token_ids);

  // Two graphs, the first over prompts 2 and 0, the second over prompt 1:
  // outputs stay in prompt order.
  std::string over20 = kAblateBoth;
  over20.replace(over20.find("[0, 1]"), 6, "[2, 0]");
  const char* plain = R"({"invoke": 1, "prompts": [1], "nodes": [
    {"kind": "get", "key": "logits"}, {"kind": "save", "name": "one", "args": [0]}]})";
  TraceResult two = run_graph_trace(lm_->llm(), {kA, kB, kB},
                                    {parse_graph_file("a.json", over20), parse_graph_file("b.json", plain)}, greedy(1));
  ASSERT_EQ(two.outputs().size(), 3u);
  EXPECT_EQ(two.output(0).prompt_token_ids, kA);
  EXPECT_EQ(two.output(1).prompt_token_ids, kB);
  EXPECT_EQ(two[Saved("logits")].size(0), 2);
  EXPECT_TRUE(at::equal(two[Saved("logits")][1], json[Saved("logits")][0]));  // prompt 0 second, ablated
  EXPECT_EQ(two[Saved("one")].size(0), 1);

  // Errors: a prompt no graph runs, one run twice, one out of range, a bad field.
  auto err = [&](const std::vector<std::vector<int32_t>>& prompts, const std::vector<tracing::GraphFile>& graphs) {
    return error_of([&] { run_graph_trace(lm_->llm(), prompts, graphs, greedy(1)); });
  };
  EXPECT_NE(err({kA, kB, kB}, {parse_graph_file("g.json", kAblateBoth)}).find("prompt 2 is run by no graph"),
            std::string::npos);
  EXPECT_NE(err({kA, kB}, {parse_graph_file("a.json", kAblateBoth), parse_graph_file("b.json", plain)})
                .find("b.json: prompt 1 is already run by a.json"),
            std::string::npos);
  EXPECT_NE(err({kA}, {parse_graph_file("g.json", kAblateBoth)}).find("names prompt 1, but the trace has 1"),
            std::string::npos);
  try {
    parse_graph_file("bad.json", "{\n  \"prompts\": [0, -1], \"nodes\": []}");
    ADD_FAILURE() << "negative prompt index accepted";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).rfind("bad.json:2:", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"prompts\" must hold prompt indices (integers >= 0), got -1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nnsight
