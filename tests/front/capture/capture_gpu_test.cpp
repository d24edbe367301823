// Activation capture on a GPU: decode steps keep their CUDA graphs (capture's
// hooks run after each replay), the records leave the device off the loop
// thread, and they equal the CPU engine's records of the same requests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <nnsight/capture.hpp>

#include "runner/engine/engine.h"
#include "support/gpu_available.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

struct Captured {
  std::vector<CaptureRecord> records;
  int64_t hooked_replays = 0;
};

// Six greedy requests on a tiny float32 Llama with layers 0 and 1 captured.
Captured capture_on(const std::string& device) {
  ModelConfig cfg = testing::tiny_llama_config(false);
  cfg.max_position = 256;
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat).device(device));
  testing::randomize(*model, 9);
  const std::string id = "capgpu-" + std::to_string(::getpid()) + "-" + device;
  const EngineArgs args = EngineArgs()
                              .device(device)
                              .kv_cache_memory_mb(8)
                              .max_num_seqs(8)
                              .engine_id(id)
                              .capture_enabled(true)
                              .capture_layers("0,1")
                              .capture_buffer_size_gb(0.02);
  auto [engine, runner] = testing::tiny_engine_with_runner(args, model);
  ActivationReader reader(id);
  for (int i = 0; i < 6; ++i) {
    runner::RequestInput in;
    for (int j = 0; j < 3 + 2 * i; ++j) in.prompt_token_ids.push_back(4 + (i * 13 + j * 5) % 90);
    in.params = SamplingParams().temperature(0).max_tokens(6).ignore_eos(true);
    engine->add_request(std::move(in));
  }
  for (const auto& [rid, o] : testing::run_to_completion(*engine)) EXPECT_EQ(o.error, "");
  Captured out;
  out.records = reader.since(0);
  if (const runner::DecodeGraphs* g = runner->decode_graphs()) out.hooked_replays = g->hooked_replays();
  return out;
}

TEST(CaptureGpu, DecodeGraphsKeepCaptureAndItsRecordsEqualTheCpus) {
  if (auto why = testing::why_no_cuda_kernels(); !why.empty()) GTEST_SKIP() << "GPU capture test skipped: " << why;
  const Captured gpu = capture_on("cuda"), cpu = capture_on("cpu");
  EXPECT_GE(gpu.hooked_replays, 4) << "decode steps replayed graphs with capture's hooks deferred";
  ASSERT_EQ(gpu.records.size(), cpu.records.size()) << "every record reached the ring by the requests' finish";
  ASSERT_FALSE(gpu.records.empty());
  for (size_t i = 0; i < gpu.records.size(); ++i) {
    EXPECT_EQ(gpu.records[i].step, cpu.records[i].step);
    EXPECT_EQ(gpu.records[i].layer, cpu.records[i].layer);
    EXPECT_EQ(gpu.records[i].position, cpu.records[i].position);
    EXPECT_TRUE(at::allclose(gpu.records[i].value, cpu.records[i].value, 1e-3, 1e-3)) << "record " << i;
  }
}

}  // namespace
}  // namespace nnsight
