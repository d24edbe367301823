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
#include "support/tiny_engine.h"

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
};

// `seqs` requests of 6 prompt tokens each, 4 greedy tokens: the ATen calls
// of the step that prefills them all and of the next (decoding them all).
StepCounts run(int64_t seqs, double temperature = 0.0) {
  auto engine = testing::tiny_engine(EngineArgs().kv_cache_memory_mb(16).max_num_seqs(64), testing::tiny_llama());
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
