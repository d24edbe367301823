// The guard on the device path (what a GPU runs, forced on the CPU with
// kernels::ForceDevicePath): an engine step's ATen operator calls do not
// grow with the number of sequences it runs -- no host loop over sequences
// launching kernels (on a GPU, each call is a kernel launch). And the
// device path generates what the CPU kernels generate.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "core/kernels/kernel_path.h"
#include "runner/engine/engine.h"
#include "support/tiny_engine.h"
#include "support/trace_beside.h"

namespace nnsight {
namespace {

// Counts the ATen operator calls on every thread while it lives.
class OpCounter {
 public:
  OpCounter() {
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
          count().fetch_add(1, std::memory_order_relaxed);
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION}));
  }
  ~OpCounter() { at::removeCallback(handle_); }
  static std::atomic<int64_t>& count() {
    static std::atomic<int64_t> n{0};
    return n;
  }

 private:
  at::CallbackHandle handle_;
};

struct StepCounts {
  int64_t prefill = 0, decode = 0;
  std::map<uint64_t, std::vector<int32_t>> tokens;  // by request, in submission order
  int64_t graph_replays = 0;                        // decode steps through the padded buckets
};

// `seqs` requests of 6 prompt tokens each, 4 greedy tokens: the ATen calls
// of the step that prefills them all and of the next (decoding them all).
// The counts are of the eager steps unless `graphs`: with the device path
// forced on the CPU the decode graphs' buckets run eagerly (their fixed
// context length makes LibTorch's CPU batched matmul loop over the batch, a
// CPU detail a GPU's one kernel does not have).
StepCounts run(int64_t seqs, double temperature = 0.0, bool graphs = false) {
  const EngineArgs args = EngineArgs().kv_cache_memory_mb(16).max_num_seqs(64).cuda_graphs(graphs);
  auto [engine, runner] = testing::tiny_engine_with_runner(args, testing::tiny_llama());
  for (int64_t s = 0; s < seqs; ++s) {
    runner::RequestInput in;
    for (int32_t t = 0; t < 6; ++t) in.prompt_token_ids.push_back(static_cast<int32_t>(3 + (s * 7 + t * 5) % 90));
    in.params = SamplingParams().temperature(temperature).max_tokens(4).ignore_eos(true).seed(100 + s);
    engine->add_request(std::move(in));
  }
  StepCounts out;
  auto counted_step = [&] {
    OpCounter counter;
    const int64_t before = OpCounter::count().load();
    engine->step();
    return OpCounter::count().load() - before;
  };
  out.prefill = counted_step();
  out.decode = counted_step();
  for (const auto& [id, o] : testing::run_to_completion(*engine)) out.tokens[id] = o.token_ids;
  if (const runner::DecodeGraphs* g = runner->decode_graphs()) out.graph_replays = g->replays();
  return out;
}

TEST(DevicePathStep, AtenCallsPerStepDoNotGrowWithTheSequences) {
  kernels::ForceDevicePath device;
  const StepCounts two = run(2), eight = run(8), thirty_two = run(32);
  EXPECT_GT(two.decode, 0);
  EXPECT_EQ(two.prefill, eight.prefill);
  EXPECT_EQ(two.prefill, thirty_two.prefill);
  EXPECT_EQ(two.decode, eight.decode);
  EXPECT_EQ(two.decode, thirty_two.decode);
}

// Sampling with a temperature runs on the device too (device_sampler.h): the
// same number of calls for 2 or 32 sampling sequences, and the same draws
// when run again.
TEST(DevicePathStep, SampledStepsDoNotGrowWithTheSequencesEither) {
  kernels::ForceDevicePath device;
  const StepCounts two = run(2, 0.8), thirty_two = run(32, 0.8);
  EXPECT_EQ(two.prefill, thirty_two.prefill);
  EXPECT_EQ(two.decode, thirty_two.decode);
  const StepCounts again = run(32, 0.8);
  auto a = again.tokens.begin();
  for (auto b = thirty_two.tokens.begin(); b != thirty_two.tokens.end(); ++a, ++b) EXPECT_EQ(a->second, b->second);
}

// The decode graphs' path without the capture: on the CPU with the device
// path forced, untraced decode steps go through the padded buckets (reading
// the host fields a replayed graph would) and generate what the CPU kernels
// generate, greedy and sampled alike.
TEST(DevicePathStep, DecodeBucketsGenerateWhatTheCpuKernelsGenerate) {
  const StepCounts cpu = run(5);
  StepCounts buckets, sampled, sampled_eager;
  {
    kernels::ForceDevicePath device;
    buckets = run(5, 0.0, /*graphs=*/true);
    sampled = run(5, 0.8, /*graphs=*/true);
    sampled_eager = run(5, 0.8, /*graphs=*/false);
  }
  EXPECT_GE(buckets.graph_replays, 3) << "every decode step after the prefill";
  EXPECT_EQ(sampled_eager.graph_replays, 0);
  ASSERT_EQ(buckets.tokens.size(), 5u);
  auto a = cpu.tokens.begin();
  for (auto b = buckets.tokens.begin(); b != buckets.tokens.end(); ++a, ++b) EXPECT_EQ(a->second, b->second);
  auto c = sampled_eager.tokens.begin();
  for (auto s = sampled.tokens.begin(); s != sampled.tokens.end(); ++c, ++s) EXPECT_EQ(c->second, s->second);
}

// Scales layer 1's input by 1.5 at every step after saving layer 0's output
// (a write: the forward changes).
const char* kSaveAndSteer =
    "{\"nodes\": [{\"kind\": \"iter\", \"start\": 0, \"stop\": \"all\"}, "
    "{\"kind\": \"get\", \"key\": \"model.layers.0.output\", \"step\": {\"iter\": 0}}, "
    "{\"kind\": \"save\", \"name\": \"h\", \"args\": [1], \"mode\": \"append\"}, "
    "{\"kind\": \"get\", \"key\": \"model.layers.1.input\", \"step\": {\"iter\": 0}}, "
    "{\"kind\": \"const\", \"value\": 1.5}, "
    "{\"kind\": \"op\", \"op\": \"mul\", \"args\": [3, 4]}, "
    "{\"kind\": \"set\", \"key\": \"model.layers.1.input\", \"step\": {\"iter\": 0}, \"args\": [5]}, "
    "{\"kind\": \"end\"}]}";

// Three untraced requests (6 tokens) beside one that runs `graph` (3
// tokens; by default: saves layer 0's output every step), on the device
// path forced on the CPU.
testing::TraceBeside run_beside_a_trace(bool graphs, const std::string& graph = "") {
  kernels::ForceDevicePath device;
  const EngineArgs args = EngineArgs().kv_cache_memory_mb(16).max_num_seqs(8).cuda_graphs(graphs);
  auto [engine, runner] = testing::tiny_engine_with_runner(args, testing::tiny_llama());
  std::vector<std::vector<int32_t>> prompts(3);
  for (int64_t s = 0; s < 3; ++s)
    for (int32_t t = 0; t < 5; ++t) prompts[s].push_back(static_cast<int32_t>(3 + (s * 13 + t * 7) % 90));
  return testing::run_trace_beside(*engine, *runner, prompts, 6,
                                   graph.empty() ? testing::save_every_step("model.layers.0.output") : graph, 3);
}

// A trace that only saves runs its decode steps through the buckets too,
// its hooks deferred until after the forward (core/hook_taps.h): the same
// tokens for everyone and the same saves as eager steps give it. Bitwise
// for the prompt (an eager prefill step either way); the decode rows come
// from the bucket's forward, whose fixed context length (the host fields a
// replayed graph sees) sums the CPU's attention in another order.
TEST(DevicePathStep, TracesThatOnlySaveRunInTheDecodeBuckets) {
  const testing::TraceBeside with = run_beside_a_trace(true), without = run_beside_a_trace(false);
  EXPECT_EQ(with.hooked_replays, 2) << "the traced request's two decode steps";
  EXPECT_GE(with.replays, with.hooked_replays + 3) << "and the untraced requests' last decode steps";
  EXPECT_EQ(without.replays, 0);
  EXPECT_EQ(with.tokens, without.tokens);
  ASSERT_TRUE(with.saved.defined() && without.saved.defined());
  ASSERT_EQ(with.saved.sizes(), without.saved.sizes());
  EXPECT_EQ(with.saved.size(0), 4 + 2) << "the prompt's rows, then one row for each decode step";
  EXPECT_TRUE(at::equal(with.saved.narrow(0, 0, 4), without.saved.narrow(0, 0, 4)));
  EXPECT_TRUE(at::allclose(with.saved, without.saved, /*rtol=*/0, /*atol=*/1e-5))
      << (with.saved - without.saved).abs().max();
  EXPECT_GT(with.saved.narrow(0, 4, 2).abs().max().item<float>(), 0.1f) << "the decode rows are the layer's values";
}

// A trace that writes keeps its steps eager (its hooks must run inside the
// forward); the steps after it finished go through the buckets again;
// neither changes a token or a save.
TEST(DevicePathStep, TracesThatWriteRunEagerBesideTheDecodeBuckets) {
  const testing::TraceBeside with = run_beside_a_trace(true, kSaveAndSteer),
                             without = run_beside_a_trace(false, kSaveAndSteer);
  EXPECT_EQ(with.hooked_replays, 0);
  EXPECT_GE(with.replays, 3) << "the untraced requests' last decode steps";
  EXPECT_EQ(without.replays, 0);
  EXPECT_EQ(with.tokens, without.tokens);
  ASSERT_TRUE(with.saved.defined() && without.saved.defined());
  EXPECT_EQ(with.saved.size(0), 4 + 2);
  EXPECT_TRUE(at::equal(with.saved, without.saved));
  // The steering changed the traced request's tokens (else this test shows nothing).
  EXPECT_NE(with.tokens.back(), run_beside_a_trace(true).tokens.back());
}

TEST(DevicePathStep, GeneratesWhatTheCpuKernelsGenerate) {
  StepCounts cpu = run(8);
  StepCounts device;
  {
    kernels::ForceDevicePath forced;
    device = run(8);
  }
  ASSERT_EQ(cpu.tokens.size(), 8u);
  ASSERT_EQ(device.tokens.size(), 8u);
  auto a = cpu.tokens.begin();
  for (auto b = device.tokens.begin(); b != device.tokens.end(); ++a, ++b) EXPECT_EQ(a->second, b->second);
}

}  // namespace
}  // namespace nnsight
