// Graphs written as JSON run as traces (src/front/trace_client/graph_trace.h) on a
// tiny random Llama: the saves equal those of the same trace written in C++,
// shared graphs and cross-invoke references work, and errors before and
// during the run name the node's place in its file.
#include "front/trace_client/graph_trace.h"

#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include "front/trace_worker/recorded_trace.h"
#include "runner/engine/llm_access.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"

namespace nnsight::tracing {
namespace {

class GraphTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nnsight::testing::ScratchDir();
    nnsight::testing::write_hf_checkpoint(dir_->path(), *nnsight::testing::tiny_llama());
    lm_ = new LanguageModel(EngineArgs().model(dir_->path()).kv_cache_memory_mb(16).show_progress(false));
  }
  static void TearDownTestSuite() {
    delete lm_;
    delete dir_;
  }
  static SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }
  static GraphFile graph(const std::string& text) { return parse_graph_file("g.json", text); }
  static std::string error_of(const std::vector<std::vector<int32_t>>& prompts, const std::vector<GraphFile>& graphs) {
    try {
      run_graph_trace(lm_->llm(), prompts, graphs, greedy(2));
    } catch (const TraceError& e) {
      return e.what();
    }
    return "";
  }

  static nnsight::testing::ScratchDir* dir_;
  static LanguageModel* lm_;
};
nnsight::testing::ScratchDir* GraphTrace::dir_ = nullptr;
LanguageModel* GraphTrace::lm_ = nullptr;

const std::vector<int32_t> kPromptA = {5, 17, 33, 8, 61};
const std::vector<int32_t> kPromptB = {9, 2, 44};

// Ablates layer 0's MLP; saves layer 1's output and the logits.
const char* kAblate = R"({"format": "nnsight.graph", "version": 1, "nodes": [
  {"kind": "get", "key": "model.layers.0.mlp.output"},
  {"kind": "const", "value": 0},
  {"kind": "op", "op": "mul", "args": [0, 1]},
  {"kind": "set", "key": "model.layers.0.mlp.output", "args": [2]},
  {"kind": "get", "key": "model.layers.1.output"},
  {"kind": "save", "name": "h", "args": [4]},
  {"kind": "get", "key": "logits"},
  {"kind": "save", "name": "logits", "args": [6]}
]})";

TEST_F(GraphTrace, SavesEqualTheSameTraceWrittenInCpp) {
  TraceResult json = run_graph_trace(lm_->llm(), {kPromptA}, {graph(kAblate)}, greedy(3));
  Saved h, logits;
  TraceResult cpp = lm_->trace(kPromptA, greedy(3), [&](Tracer&) {
    auto mlp = lm_->envoy("model.layers.0.mlp");
    mlp.output() = mlp.output() * 0;
    h = lm_->envoy("model.layers.1").output().save();
    logits = lm_->logits().save();
  });
  ASSERT_EQ(json.saves().size(), 2u);
  EXPECT_TRUE(at::equal(json[Saved("h")], cpp[h]));
  EXPECT_TRUE(at::equal(json[Saved("logits")], cpp[logits]));
  EXPECT_EQ(json.output().token_ids, cpp.output().token_ids);
  // And the ablation did something.
  Saved clean;
  auto plain = lm_->trace(kPromptA, greedy(3), [&](Tracer&) { clean = lm_->logits().save(); });
  EXPECT_FALSE(at::equal(plain[clean], cpp[logits]));
}

TEST_F(GraphTrace, ASharedGraphSavesPerPrompt) {
  TraceResult r = run_graph_trace(lm_->llm(), {kPromptA, kPromptB}, {graph(kAblate)}, greedy(1));
  ASSERT_EQ(r.outputs().size(), 2u);
  EXPECT_TRUE(r.has(Saved("0/h")));
  EXPECT_TRUE(r.has(Saved("1/logits")));
  EXPECT_EQ(r[Saved("0/h")].size(0), 5);
  EXPECT_EQ(r[Saved("1/h")].size(0), 3);
  // Each prompt's values are what it gets alone.
  TraceResult alone = run_graph_trace(lm_->llm(), {kPromptB}, {graph(kAblate)}, greedy(1));
  EXPECT_LE((alone[Saved("h")] - r[Saved("1/h")]).abs().max().item<double>(), 1e-5);
}

TEST_F(GraphTrace, OneGraphPerPromptWithACrossInvokeValue) {
  // Invoke 0 reads layer 1's last row; invoke 1 writes it into its own last row.
  const char* src = R"({"nodes": [
    {"kind": "get", "key": "model.layers.1.output"},
    {"kind": "const", "value": {"index": [-1]}},
    {"kind": "op", "op": "getitem", "args": [0, 1]},
    {"kind": "save", "name": "src_last", "args": [2]}
  ]})";
  const char* dst = R"({"invoke": 1, "nodes": [
    {"kind": "get", "key": "model.layers.1.output"},
    {"kind": "external", "invoke": 0, "node": 2},
    {"kind": "const", "value": {"index": [-1]}},
    {"kind": "op", "op": "setitem", "args": [0, 2, 1]},
    {"kind": "get", "key": "model.layers.1.output"},
    {"kind": "save", "name": "dst", "args": [4]}
  ]})";
  TraceResult r = run_graph_trace(lm_->llm(), {kPromptA, kPromptB}, {graph(src), graph(dst)}, greedy(1));
  EXPECT_TRUE(at::allclose(r[Saved("dst")][-1], r[Saved("src_last")]));
  // The same in C++.
  Saved dst_cpp;
  auto cpp = lm_->trace(greedy(1), [&](Tracer& t) {
    Proxy hv;
    t.invoke(kPromptA, [&] { hv = lm_->envoy("model.layers.1").output()[{-1}]; });
    t.invoke(kPromptB, [&] {
      lm_->envoy("model.layers.1").output()[{-1}] = hv;
      dst_cpp = lm_->envoy("model.layers.1").output().save();
    });
  });
  EXPECT_TRUE(at::equal(r[Saved("dst")], cpp[dst_cpp]));
}

TEST_F(GraphTrace, ErrorsNameTheNodeInItsFile) {
  // Graph count.
  EXPECT_NE(error_of({kPromptA, kPromptB, kPromptB}, {graph(kAblate), graph(kAblate)}).find("3 prompts"),
            std::string::npos);
  // An unknown module path, with a suggestion.
  std::string msg =
      error_of({kPromptA}, {graph("{\"nodes\": [\n{\"kind\": \"get\", \"key\": \"model.layers.1.mpl.output\"}]}")});
  EXPECT_NE(msg.find("g.json:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.layers.1.mlp"), std::string::npos) << msg;
  // Reads out of order within a step.
  msg = error_of({kPromptA}, {graph("{\"nodes\": [\n{\"kind\": \"get\", \"key\": \"model.layers.1.output\"},\n"
                                    "{\"kind\": \"get\", \"key\": \"model.layers.0.output\"}]}")});
  EXPECT_NE(msg.find("out-of-order"), std::string::npos) << msg;
  EXPECT_NE(msg.find("g.json:3"), std::string::npos) << msg;
  // Save names collide across graphs.
  msg = error_of({kPromptA, kPromptB}, {graph(kAblate), graph(kAblate)});
  EXPECT_NE(msg.find("g.json:7:3: the save name 'h' of prompt 1 is already used at g.json:7:3 (prompt 0)"),
            std::string::npos)
      << msg;
  // A failure while running: a set of the wrong shape.
  msg = error_of({kPromptA}, {graph("{\"nodes\": [\n{\"kind\": \"const\", \"value\": {\"dtype\": \"float32\", "
                                    "\"shape\": [2], \"data\": [1, 2]}},\n"
                                    "{\"kind\": \"set\", \"key\": \"model.layers.0.mlp.output\", \"args\": [0]}]}")});
  EXPECT_NE(msg.find("g.json:3"), std::string::npos) << msg;
}

// A trace received as data (a remote client's, through `nnsight serve`) is
// checked, then its payload bytes pass through as they came: only the
// sampling params change (this engine's trace id, the tracing policy).
TEST_F(GraphTrace, ARecordedTracesPayloadBytesPassThroughUnchanged) {
  const runner::ModelStructure& structure = runner::LLMAccess::engine(lm_->llm()).model_structure();
  std::vector<runner::RequestInput> prompts(2);
  prompts[0].prompt_token_ids = kPromptA;
  prompts[1].prompt_token_ids = kPromptB;
  PreparedGraphTrace sent = prepare_graph_trace(structure, prompts, {graph(kAblate)}, greedy(1), 7);
  std::vector<std::string> bytes;
  for (auto& r : sent.requests) {
    bytes.push_back(r.params.payload());
    r.params = SamplingParams(greedy(1)).payload(r.params.payload()).invoke_index(r.params.invoke_index());
  }
  auto received = prepare_recorded_trace(structure, sent.requests, dsl::Limits(), 1234);
  ASSERT_EQ(received.size(), 2u);
  for (size_t i = 0; i < received.size(); ++i) {
    EXPECT_EQ(received[i].params.payload(), bytes[i]) << i;
    EXPECT_EQ(received[i].params.trace_id(), 1234u);
    EXPECT_FALSE(received[i].params.prefix_caching());
  }
}

// SamplingParams::max_saved_bytes bounds a trace's saves as they are made
// (the server sets it from --max-saved-mb): the save that crosses it fails
// the trace, naming the limit; under it the trace runs as before.
TEST_F(GraphTrace, TheSavedBytesLimitInSamplingParamsFailsTheSaveThatCrossesIt) {
  // kAblate saves h [5, hidden] and the logits [5, vocab] in float32.
  TraceResult whole = run_graph_trace(lm_->llm(), {kPromptA}, {graph(kAblate)}, greedy(1));
  const int64_t bytes = whole[Saved("h")].nbytes() + whole[Saved("logits")].nbytes();
  TraceResult fits = run_graph_trace(lm_->llm(), {kPromptA}, {graph(kAblate)}, greedy(1).max_saved_bytes(bytes));
  EXPECT_TRUE(at::equal(fits[Saved("logits")], whole[Saved("logits")]));
  try {
    run_graph_trace(lm_->llm(), {kPromptA}, {graph(kAblate)}, greedy(1).max_saved_bytes(bytes - 1));
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("saved bytes limit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("logits"), std::string::npos) << msg;
  }
  EXPECT_THROW(greedy(1).max_saved_bytes(-1).validate(), ConfigError);
}

}  // namespace
}  // namespace nnsight::tracing
