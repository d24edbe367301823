// Decode steps through padded buckets (runner/model_runner/decode_graphs.h),
// checked on the CPU where the same padded buffers run eagerly (capture off):
// the padder's rows (the step's rows as they were, then scratch rows), the
// bucket sizes, and the real rows' logits equal to the unpadded step's, for
// the CPU kernels and for the device path forced on the CPU, while the
// padding rows write only the scratch block. The captured graphs themselves
// need a GPU (CudaGraphs.* below skip elsewhere, saying why).
#include "runner/model_runner/decode_graphs.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include <nnsight/nnsight.hpp>

#include "batching/decode_padder.h"
#include "batching/flattener.h"
#include "core/kernels/cuda_kernels.h"
#include "core/kernels/fixed_rows_linear.h"
#include "core/kernels/kernel_path.h"
#include "core/safetensors/safetensors_file.h"
#include "core/weight_source.h"
#include "support/gpu_available.h"
#include "support/hf_fixtures.h"
#include "support/seq_slots.h"
#include "support/tiny_engine.h"
#include "support/trace_beside.h"
#include "support/tiny_models.h"
#include "runner/engine/engine.h"
#include "tp/nccl_process_group.h"

namespace nnsight {
namespace {

constexpr int64_t kBlock = 4;
constexpr int64_t kWidth = 8;     // block-table width (32 tokens a sequence)
constexpr int32_t kScratch = 30;  // the padding rows' block
constexpr int32_t kCanary = 31;   // a block nobody owns: must stay untouched

TEST(DecodePadder, KeepsTheStepsRowsAndAddsScratchRows) {
  batching::Flattener f(64, 8, kWidth, kBlock);
  const std::vector<batching::SeqSlot> slots = {testing::seq_slot(5, std::vector<int32_t>{7}, {0, 1}),
                                                testing::seq_slot(9, std::vector<int32_t>{8}, {2, 3, 4})};
  const batching::FlatBatch& step = f.flatten({&slots[0], &slots[1]});
  ASSERT_TRUE(batching::DecodePadder::is_decode(step));
  batching::DecodePadder padder(8, kWidth, kBlock, kScratch, 32);
  const batching::FlatBatch& p = padder.pad(&step, 4);
  EXPECT_EQ(p.meta.num_tokens, 4);
  EXPECT_EQ(p.meta.num_seqs, 4);
  EXPECT_EQ(p.meta.max_query_len, 1);
  EXPECT_EQ(p.meta.max_context_len, 32) << "fixed, whatever the step";
  EXPECT_TRUE(at::equal(p.token_ids, at::tensor({7, 8, 0, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(p.meta.positions, at::tensor({5, 9, 0, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(p.meta.slot_mapping, at::tensor({int64_t{1} * kBlock + 1, int64_t{4} * kBlock + 1,
                                                         int64_t{kScratch} * kBlock, int64_t{kScratch} * kBlock})));
  EXPECT_TRUE(at::equal(p.meta.context_lens, at::tensor({6, 10, 1, 1}, at::kInt)));
  EXPECT_TRUE(at::equal(p.meta.query_start, at::arange(5, at::kInt)));
  EXPECT_TRUE(at::equal(p.meta.logits_rows, at::arange(4, at::kLong)));
  EXPECT_TRUE(at::equal(p.meta.block_tables.narrow(0, 0, 2), step.meta.block_tables));
  EXPECT_EQ(p.meta.block_tables[2][0].item<int32_t>(), kScratch);
  EXPECT_EQ(p.meta.block_tables[3].sum().item<int32_t>(), kScratch);
  EXPECT_EQ(p.meta.context_lens_host, (std::vector<int32_t>{6, 10, 1, 1}));
  EXPECT_EQ(p.meta.query_start_host, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  // Fewer rows next time: the old rows are padding again.
  const batching::FlatBatch& one = padder.pad(nullptr, 4);
  EXPECT_TRUE(at::equal(one.token_ids, at::zeros({4}, at::kLong)));
  EXPECT_THROW(padder.pad(&step, 1), c10::Error);

  const std::vector<batching::SeqSlot> prefill = {testing::seq_slot(0, std::vector<int32_t>{1, 2, 3}, {0})};
  EXPECT_FALSE(batching::DecodePadder::is_decode(f.flatten({&prefill[0]})));
}

TEST(DecodeGraphs, BucketSizes) {
  EXPECT_EQ(runner::DecodeGraphs::bucket_sizes(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(runner::DecodeGraphs::bucket_sizes(5), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(runner::DecodeGraphs::bucket_sizes(32), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32}));
  EXPECT_EQ(runner::DecodeGraphs::bucket_sizes(20), (std::vector<int64_t>{1, 2, 4, 8, 16, 20}));
}

// `n` sequences (prompts of 3 + s tokens) prefilled into a fresh cache of
// a tiny Llama; decode_step() flattens their next step (one token each).
struct Prefilled {
  std::shared_ptr<CausalLM> model = testing::tiny_llama();
  std::vector<KVCache> kv =
      allocate_kv_caches(model->num_layers(), 32, kBlock, model->local_kv_heads(), model->head_dim(), model->options());
  std::vector<batching::SeqSlot> prompts, decodes;
  batching::Flattener flattener{64, 16, kWidth, kBlock};

  explicit Prefilled(int64_t n) {
    for (int64_t s = 0; s < n; ++s) {
      std::vector<int32_t> tokens;
      for (int64_t t = 0; t < 3 + s; ++t) tokens.push_back(static_cast<int32_t>(5 + 7 * s + t));
      const std::vector<int32_t> blocks = {static_cast<int32_t>(3 * s), static_cast<int32_t>(3 * s + 1),
                                           static_cast<int32_t>(3 * s + 2)};
      prompts.push_back(testing::seq_slot(0, tokens, blocks));
      decodes.push_back(testing::seq_slot(3 + s, std::vector<int32_t>{static_cast<int32_t>(40 + s)}, blocks));
    }
    std::vector<const batching::SeqSlot*> p;
    for (const auto& s : prompts) p.push_back(&s);
    const batching::FlatBatch& b = flattener.flatten(p);
    model->forward(b.token_ids, b.meta, kv);
  }
  const batching::FlatBatch& decode_step() {
    std::vector<const batching::SeqSlot*> d;
    for (const auto& s : decodes) d.push_back(&s);
    return flattener.flatten(d);
  }
};

// The buckets for Prefilled's cache, run eagerly (no capture on the CPU).
runner::DecodeGraphOptions uncaptured() {
  return runner::DecodeGraphOptions()
      .rows(16)
      .blocks_per_seq(kWidth)
      .block(kBlock)
      .scratch(kScratch)
      .context(32)
      .captured(false);
}

// Prefills `n` sequences, then returns their decode step's logits run
// eagerly and through the padded buckets.
void expect_padded_equals_eager(int64_t n, bool as_replayed = false) {
  Prefilled pre(n);
  auto& model = pre.model;
  auto& kv = pre.kv;
  const batching::FlatBatch& step = pre.decode_step();
  const at::Tensor eager = model->compute_logits(model->forward(step.token_ids, step.meta, kv), step.meta.logits_rows);
  const at::Tensor canary_before = kv[0].key[kCanary].clone();
  runner::DecodeGraphs graphs(*model, kv, uncaptured().as_replayed(as_replayed));
  ASSERT_GT(graphs.bucket_for(step), n - 1);
  const runner::DecodeGraphs::Step s = graphs.run(step);
  ASSERT_EQ(s.logits.sizes(), eager.sizes());
  EXPECT_TRUE(at::allclose(s.logits, eager, 1e-5, 1e-5))
      << n << " rows: max diff " << (s.logits - eager).abs().max().item<float>();
  EXPECT_TRUE(at::equal(s.token_ids, step.token_ids));
  EXPECT_TRUE(at::equal(s.meta.context_lens, step.meta.context_lens));
  EXPECT_EQ(graphs.replays(), 1);
  EXPECT_EQ(graphs.graphs_captured(), 0);
  if (graphs.bucket_for(step) > n) {
    EXPECT_NE(kv[0].key[kScratch].abs().sum().item<float>(), 0.f) << "padding rows wrote the scratch block";
  }
  EXPECT_TRUE(at::equal(kv[0].key[kCanary], canary_before));
}

TEST(DecodeGraphs, PaddedStepGivesTheEagerStepsLogits) {
  for (int64_t n : {1, 3, 5}) expect_padded_equals_eager(n);
}

// What a replayed graph computes: the device path reads only the batch's
// device tensors and the host fields the padder fixes, so the bucket's fixed
// host fields (those of a batch of padding rows) give the step's logits.
TEST(DecodeGraphs, PaddedStepGivesTheEagerStepsLogitsOnTheDevicePath) {
  kernels::ForceDevicePath device;
  for (int64_t n : {3, 9}) {
    expect_padded_equals_eager(n);
    expect_padded_equals_eager(n, /*as_replayed=*/true);
  }
}

// A step with hooked modules runs the bucket's graph for that set of hooks:
// the hooks run after the forward on the step's rows (the values the eager
// step's hooks see), and beyond `max_hook_sets` sets a new one gets no graph.
TEST(DecodeGraphs, HookedModulesGetGraphsOfTheirOwnAndTheirHooksAfterTheForward) {
  Prefilled pre(3);
  auto& model = pre.model;
  auto& kv = pre.kv;
  Module* layer = nullptr;
  Module* mlp = nullptr;
  for (const auto& [path, m] : model->named_hookable_modules()) {
    if (path == "model.layers.1") layer = m;
    if (path == "model.layers.0.mlp") mlp = m;
  }
  ASSERT_TRUE(layer && mlp);
  std::vector<at::Tensor> seen;
  auto hook = layer->register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO& out) {
    seen.push_back(out.at(0));
    return std::optional<ModuleIO>();
  });
  const batching::FlatBatch& step = pre.decode_step();
  model->compute_logits(model->forward(step.token_ids, step.meta, kv), step.meta.logits_rows);
  ASSERT_EQ(seen.size(), 1u);
  const at::Tensor eager = seen[0].clone();  // [3, hidden]
  seen.clear();

  runner::DecodeGraphs graphs(*model, kv, uncaptured().hook_sets(1));
  const runner::HookedModules hooked = {runner::HookedModule{layer, false, true}};
  const runner::HookedModules other = {runner::HookedModule{mlp, true, false}};
  ASSERT_EQ(graphs.bucket_for(step), 4);
  EXPECT_TRUE(graphs.can_run(step, hooked));
  graphs.run(step, hooked);
  ASSERT_EQ(seen.size(), 1u) << "the hook ran once, after the forward";
  EXPECT_EQ(seen[0].size(0), 3) << "on the step's rows, not the bucket's 4";
  EXPECT_TRUE(at::allclose(seen[0], eager, 1e-5, 1e-5)) << (seen[0] - eager).abs().max();
  EXPECT_EQ(graphs.hooked_replays(), 1);
  EXPECT_TRUE(graphs.can_run(step, hooked));
  EXPECT_TRUE(graphs.can_run(step, {})) << "no hook: the plain graph";
  EXPECT_FALSE(graphs.can_run(step, other)) << "one hook set at most";
  EXPECT_THROW(graphs.run(step, other), c10::Error);
  hook.remove();
}

// A bucket's second graph (another set of hooked modules) is made after the
// bucket replayed a step: the forwards a capture runs for real before it
// must run on padding rows, writing only the scratch block -- not on the last
// step's rows, whose cache blocks may belong to other requests by now.
TEST(DecodeGraphs, ANewGraphInABucketWritesNoRequestsBlocks) {
  Prefilled pre(3);
  auto& model = pre.model;
  auto& kv = pre.kv;
  runner::DecodeGraphs graphs(*model, kv, uncaptured());
  const batching::FlatBatch& first = pre.decode_step();
  graphs.run(first);  // the bucket's plain graph
  const at::Tensor first_slots = first.meta.slot_mapping.clone();
  for (auto& c : kv) {  // the blocks change hands: another request's keys and values there
    c.key.view({-1, c.num_kv_heads(), c.head_dim()}).index_fill_(0, first_slots, 7.0);
    c.value.view({-1, c.num_kv_heads(), c.head_dim()}).index_fill_(0, first_slots, 7.0);
  }
  std::vector<batching::SeqSlot> next;
  for (int32_t s = 0; s < 3; ++s)
    next.push_back(testing::seq_slot(4 + s, std::vector<int32_t>{50 + s}, pre.prompts[s].block_table));
  std::vector<const batching::SeqSlot*> n;
  for (const auto& s : next) n.push_back(&s);
  const batching::FlatBatch& step = pre.flattener.flatten(n);
  Module* layer = nullptr;
  for (const auto& [path, m] : model->named_hookable_modules())
    if (path == "model.layers.1") layer = m;
  ASSERT_NE(layer, nullptr);
  int fired = 0;
  auto hook = layer->register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO&) {
    ++fired;
    return std::optional<ModuleIO>();
  });
  graphs.run(step, {runner::HookedModule{layer, false, true}});
  EXPECT_EQ(fired, 1);
  for (const auto& c : kv) {
    EXPECT_TRUE(
        (c.key.view({-1, c.num_kv_heads(), c.head_dim()}).index_select(0, first_slots) == 7.0).all().item<bool>());
    EXPECT_TRUE(
        (c.value.view({-1, c.num_kv_heads(), c.head_dim()}).index_select(0, first_slots) == 7.0).all().item<bool>());
  }
  hook.remove();
}

// At start (make_all) every bucket gets its plain graph: its warm-up
// forwards write the scratch block alone, and steps then make no graph of
// their own and give the logits they gave without it.
TEST(DecodeGraphs, MakeAllGivesEveryBucketItsPlainGraphWritingOnlyTheScratchBlock) {
  Prefilled pre(3);
  std::vector<at::Tensor> keys_before, values_before;
  for (const auto& c : pre.kv) {
    keys_before.push_back(c.key.clone());
    values_before.push_back(c.value.clone());
  }
  runner::DecodeGraphs graphs(*pre.model, pre.kv, uncaptured());
  graphs.make_all();
  EXPECT_EQ(graphs.graphs_made(), static_cast<int64_t>(runner::DecodeGraphs::bucket_sizes(16).size()));
  EXPECT_EQ(graphs.replays(), 0);
  for (size_t l = 0; l < pre.kv.size(); ++l) {
    // [blocks, block_size, kv_heads, head_dim] or the like: block-major.
    for (int64_t blk = 0; blk < pre.kv[l].key.size(0); ++blk) {
      if (blk == kScratch) continue;
      EXPECT_TRUE(at::equal(pre.kv[l].key[blk], keys_before[l][blk])) << "layer " << l << " block " << blk;
      EXPECT_TRUE(at::equal(pre.kv[l].value[blk], values_before[l][blk])) << "layer " << l << " block " << blk;
    }
  }
  EXPECT_FALSE(at::equal(pre.kv[0].key[kScratch], keys_before[0][kScratch])) << "the padding rows wrote there";
  graphs.make_all();  // nothing missing: nothing made
  EXPECT_EQ(graphs.graphs_made(), static_cast<int64_t>(runner::DecodeGraphs::bucket_sizes(16).size()));

  const batching::FlatBatch& step = pre.decode_step();
  Prefilled fresh(3);
  const batching::FlatBatch& fresh_step = fresh.decode_step();
  const at::Tensor eager = fresh.model->compute_logits(
      fresh.model->forward(fresh_step.token_ids, fresh_step.meta, fresh.kv), fresh_step.meta.logits_rows);
  const runner::DecodeGraphs::Step s = graphs.run(step);
  EXPECT_EQ(graphs.graphs_made(), static_cast<int64_t>(runner::DecodeGraphs::bucket_sizes(16).size()));
  EXPECT_EQ(graphs.replays(), 1);
  EXPECT_TRUE(at::allclose(s.logits, eager, 1e-5, 1e-5)) << (s.logits - eager).abs().max().item<float>();
}

// An engine on the device path makes its buckets' graphs when it starts
// (emulated on the CPU: the same warm-up forwards), and its first decode
// steps make none.
TEST(DecodeGraphs, AnEngineMakesEveryBucketsGraphAtStart) {
  kernels::ForceDevicePath device_path;
  auto [engine, runner] = testing::tiny_engine_with_runner(
      EngineArgs().kv_cache_memory_mb(8).max_num_seqs(16).cuda_graphs(true), testing::tiny_llama());
  const runner::DecodeGraphs* g = runner->decode_graphs();
  ASSERT_NE(g, nullptr);
  const int64_t buckets = static_cast<int64_t>(runner::DecodeGraphs::bucket_sizes(16).size());
  EXPECT_EQ(g->graphs_made(), buckets);
  runner::RequestInput in;
  in.prompt_token_ids = {5, 6, 7};
  in.params = SamplingParams().temperature(0).max_tokens(4).ignore_eos(true);
  engine->add_request(std::move(in));
  const auto outs = testing::run_to_completion(*engine);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs.begin()->second.token_ids.size(), 4u);
  EXPECT_EQ(g->replays(), 3) << "three decode steps after the prefill";
  EXPECT_EQ(g->graphs_made(), buckets);
}

// On the CPU kernels' path there are no graphs to replay, asked for or not:
// the runner builds none and every step runs eager.
TEST(DecodeGraphs, ACpuEngineRunsEveryStepEager) {
  auto [engine, runner] =
      testing::tiny_engine_with_runner(EngineArgs().kv_cache_memory_mb(8).cuda_graphs(true), testing::tiny_llama());
  EXPECT_EQ(runner->decode_graphs(), nullptr);
  runner::RequestInput in;
  in.prompt_token_ids = {5, 6, 7};
  in.params = SamplingParams().temperature(0).max_tokens(3).ignore_eos(true);
  engine->add_request(std::move(in));
  EXPECT_EQ(testing::run_to_completion(*engine).begin()->second.token_ids.size(), 3u);
}

// ---- on a GPU: the captured graphs against eager steps.

struct GpuRun {
  std::map<uint64_t, std::vector<int32_t>> tokens;  // by request, in submission order
  int64_t captured = 0, replays = 0;
};

// Greedy continuations of `prompts` by `model` (on the GPU) in an engine with
// CUDA graphs on or off, and how many graphs it captured and replayed.
GpuRun generate_on_gpu(std::shared_ptr<CausalLM> model, const std::string& dtype, bool graphs,
                       const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens) {
  const EngineArgs args =
      EngineArgs().device("cuda").dtype(dtype).kv_cache_memory_mb(16).max_num_seqs(16).cuda_graphs(graphs);
  auto [owned, runner] = testing::tiny_engine_with_runner(args, model);
  runner::Engine& engine = *owned;
  for (const auto& p : prompts) {
    runner::RequestInput in;
    in.prompt_token_ids = p;
    in.params = SamplingParams().temperature(0).max_tokens(max_tokens).ignore_eos(true);
    engine.add_request(std::move(in));
  }
  GpuRun out;
  for (const auto& [id, o] : testing::run_to_completion(engine)) {
    EXPECT_EQ(o.error, "");
    out.tokens[id] = o.token_ids;
  }
  if (const runner::DecodeGraphs* g = runner->decode_graphs()) {
    out.captured = g->graphs_captured();
    out.replays = g->replays();
  }
  return out;
}

// `n` requests of different lengths on a tiny random Llama in bf16.
GpuRun generate_on_gpu(bool graphs, int64_t n) {
  ModelConfig cfg = testing::tiny_llama_config(false);
  cfg.max_position = 256;
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
  testing::randomize(*model, 5);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t s = 0; s < n; ++s) {
    std::vector<int32_t> p;
    for (int64_t t = 0; t < 4 + 3 * s; ++t) p.push_back(static_cast<int32_t>(3 + (s * 11 + t * 5) % 90));
    prompts.push_back(p);
  }
  return generate_on_gpu(model, "bfloat16", graphs, prompts, 12);
}

TEST(CudaGraphs, DecodeStepsReplayGraphsAndGenerateWhatEagerStepsGenerate) {
  if (auto why = testing::why_no_cuda_kernels(); !why.empty()) GTEST_SKIP() << "CUDA graph test skipped: " << why;
  for (int64_t n : {1, 3, 11}) {
    const GpuRun eager = generate_on_gpu(false, n);
    const GpuRun graphs = generate_on_gpu(true, n);
    EXPECT_EQ(eager.replays, 0);
    // Every bucket's graph captured when the engine started, none after.
    EXPECT_EQ(graphs.captured, static_cast<int64_t>(runner::DecodeGraphs::bucket_sizes(16).size())) << n << " requests";
    EXPECT_GE(graphs.replays, 10) << n << " requests: 11 decode steps each";
    ASSERT_EQ(eager.tokens.size(), static_cast<size_t>(n));
    auto e = eager.tokens.begin();
    auto g = graphs.tokens.begin();
    for (; e != eager.tokens.end(); ++e, ++g) EXPECT_EQ(e->second, g->second) << n << " requests";
  }
}

// `companions` untraced requests (4 by default) beside a trace that saves
// layer 1's output at every step, on a tiny random bf16 Llama on the GPU,
// with graphs on or off; with `midway` they arrive one per step after the
// trace's prefill (run_trace_beside's join_midway).
testing::TraceBeside trace_on_gpu(bool graphs, int64_t companions = 4, bool midway = false) {
  ModelConfig cfg = testing::tiny_llama_config(false);
  cfg.max_position = 256;
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
  testing::randomize(*model, 5);
  const EngineArgs args =
      EngineArgs().device("cuda").dtype("bfloat16").kv_cache_memory_mb(16).max_num_seqs(16).cuda_graphs(graphs);
  auto [engine, runner] = testing::tiny_engine_with_runner(args, model);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(companions));
  for (int64_t s = 0; s < companions; ++s)
    for (int64_t t = 0; t < 4 + 3 * s; ++t) prompts[s].push_back(static_cast<int32_t>(3 + (s * 11 + t * 5) % 90));
  return testing::run_trace_beside(*engine, *runner, prompts, 10, testing::save_every_step("model.layers.1.output"), 8,
                                   midway);
}

// A trace that only saves replays graphs too (its hooks deferred to after
// each replay): every request's tokens and the trace's saves are the eager
// run's (the same kernels; the saves within bf16 rounding of a padded batch).
TEST(CudaGraphs, TracesThatOnlySaveReplayGraphsAndSaveWhatEagerStepsSave) {
  if (auto why = testing::why_no_cuda_kernels(); !why.empty()) GTEST_SKIP() << "CUDA graph test skipped: " << why;
  const testing::TraceBeside eager = trace_on_gpu(false), graphs = trace_on_gpu(true);
  EXPECT_EQ(eager.replays, 0);
  EXPECT_EQ(graphs.hooked_replays, 7) << "the traced request's 7 decode steps";
  EXPECT_EQ(graphs.tokens, eager.tokens);
  ASSERT_TRUE(graphs.saved.defined() && eager.saved.defined());
  ASSERT_EQ(graphs.saved.sizes(), eager.saved.sizes());
  EXPECT_EQ(graphs.saved.size(0), 4 + 7);
  EXPECT_TRUE(at::allclose(graphs.saved, eager.saved, 2e-2, 2e-2)) << (graphs.saved - eager.saved).abs().max();
}

// The traced request alone against beside 11 companions (all there from
// the start, or with `midway` arriving one per step while it decodes), with
// fixed rows off and 128, graphs on and off: its tokens agree and its saves
// agree within bf16 rounding, bitwise with fixed rows. Whether they agree
// bitwise with cuBLAS's own choice of kernels (by row count: not known to
// be invariant) is printed for the record.
void expect_alone_equals_beside(bool midway) {
  for (int64_t fixed : {int64_t{0}, int64_t{128}}) {
    kernels::UseFixedRows rows(fixed);
    for (bool graphs : {true, false}) {
      const std::string what = std::string(graphs ? "CUDA graphs" : "eager") +
                               (fixed > 0 ? ", fixed rows " + std::to_string(fixed) : ", cuBLAS's choice") +
                               (midway ? ", companions arriving while it decodes" : ", 11 companions");
      const testing::TraceBeside alone = trace_on_gpu(graphs, 0), beside = trace_on_gpu(graphs, 11, midway);
      EXPECT_EQ(alone.tokens.back(), beside.tokens.back()) << what;
      ASSERT_TRUE(alone.saved.defined() && beside.saved.defined());
      ASSERT_EQ(alone.saved.sizes(), beside.saved.sizes());
      EXPECT_TRUE(at::allclose(alone.saved, beside.saved, 2e-2, 2e-2)) << what;
      const bool bitwise = at::equal(alone.saved, beside.saved);
      if (fixed > 0) {
        EXPECT_TRUE(bitwise) << what;
      }
      std::printf("batch invariance (%s): saves alone vs beside: %s (max difference %g)\n", what.c_str(),
                  bitwise ? "bitwise equal" : "differ", (alone.saved - beside.saved).abs().max().item<double>());
    }
  }
}

// Batch invariance on the GPU: beside other prefill and decode row counts
// and another bucket. With fixed rows (NNSIGHT_FIXED_ROWS;
// core/kernels/fixed_rows_linear.h) every GEMM has one shape; the engines
// are made inside the scope, so their graphs are captured with those GEMMs.
TEST(CudaGraphs, ARequestsTokensDoNotDependOnItsCompanions) {
  if (auto why = testing::why_no_cuda_kernels(); !why.empty()) GTEST_SKIP() << "CUDA graph test skipped: " << why;
  expect_alone_equals_beside(false);
}

// Across kinds of step: alone, the traced request decodes in decode steps
// (graphs or the decode kernel); with companions arriving, every one of its
// decode steps also holds a prefill (flash for the prefills, the decode
// kernel for its row: cuda::redo_one_row_sequences).
TEST(CudaGraphs, ARequestsTokensDoNotDependOnCompanionsArrivingWhileItDecodes) {
  if (auto why = testing::why_no_cuda_kernels(); !why.empty()) GTEST_SKIP() << "CUDA graph test skipped: " << why;
  expect_alone_equals_beside(true);
}

std::vector<int32_t> ints(const at::Tensor& t) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<int32_t>(t[i].item<int64_t>()));
  return out;
}

// Every architecture of the Hugging Face fixtures on the GPU in float32, with
// the CUDA kernels and graphs: transformers' greedy continuations. Dense
// models must capture graphs; a model whose forward cannot be captured
// (the MoE routing's value-dependent shapes) runs eager and still matches.
class CudaGraphsHf : public ::testing::TestWithParam<testing::HfFixtureCase> {};

TEST_P(CudaGraphsHf, ReproduceTransformersGreedyContinuations) {
  if (auto why = testing::why_no_cuda_kernels(); !why.empty()) GTEST_SKIP() << "CUDA graph test skipped: " << why;
  const testing::HfFixtureCase& f = GetParam();
  SafetensorsFile ref(testing::hf_fixture_dir(f) + "/reference.safetensors");
  auto source = open_weights(testing::hf_fixture_dir(f));
  auto model = load_causal_lm(*source, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < 3; ++s) prompts.push_back(ints(ref.load("ids." + std::to_string(s))));
  const GpuRun run = generate_on_gpu(model, "float32", true, prompts, 6);
  int s = 0;
  for (const auto& [id, tokens] : run.tokens) {
    EXPECT_EQ(tokens, ints(ref.load("greedy." + std::to_string(s)))) << f.arch << " sequence " << s;
    ++s;
  }
  const bool moe = f.arch == "mixtral" || f.arch == "qwen3_moe";
  if (!moe) {
    EXPECT_GE(run.captured, 1) << f.arch << ": no graph captured (the log says why)";
    EXPECT_GE(run.replays, 5) << f.arch;
  }
}

const std::vector<std::string> kArchs = {"llama",    "mistral", "qwen2", "qwen3",       "gemma",   "gemma2",
                                         "gpt_neox", "olmo2",   "phi3",  "gemma3_text", "mixtral", "qwen3_moe"};
// The 4.x fixtures: the 5.x ones load through other configs into the same
// layers, but for the multimodal Gemma 3 (its base module around the stack).
INSTANTIATE_TEST_SUITE_P(Models, CudaGraphsHf,
                         ::testing::ValuesIn(testing::hf_fixtures(kArchs, {"gemma3", "olmo3", "smollm3"})),
                         testing::hf_fixture_name);

}  // namespace
}  // namespace nnsight
