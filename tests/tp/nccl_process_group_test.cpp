// The NCCL backend. It is compiled whenever the CUDA toolkit and nccl.h are
// found, GPU or not; the tests that need a GPU (and a CUDA LibTorch) skip
// with a message saying so. Without a GPU, asking for NCCL still fails
// cleanly with a message, which is checked.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <exception>
#include <mutex>
#include <thread>

#include <nnsight/error.hpp>
#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_models.h"
#include "support/tp_trace_battery.h"
#include "tp/make_process_group.h"
#include "tp/nccl_process_group.h"

namespace nnsight {
namespace {

// Why the GPU tests cannot run here, or "" when they can.
std::string why_no_gpu() {
  if (!tp::nccl_compiled()) return "this build has no NCCL backend (no CUDA toolkit or nccl.h at configure time)";
  if (!at::hasCUDA()) return "this LibTorch has no CUDA (build against a CUDA LibTorch, see scripts/gpu-check)";
  if (tp::cuda_device_count() < 1) return "no CUDA GPU is visible";
  return "";
}

TEST(NcclProcessGroup, WithoutAGpuAskingForNcclFailsWithAMessage) {
  if (!tp::nccl_compiled())
    GTEST_SKIP() << "this build has no NCCL backend (no CUDA toolkit or nccl.h at configure time)";
  if (tp::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible: the GPU tests below cover NCCL";
  testing::ScratchDir dir;
  try {
    // World size 1 with the nccl backend would bypass NCCL; talk to it directly.
    tp::make_nccl_process_group(nullptr, 0, 1, 0);
    FAIL() << "expected an error without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor-parallel rank 0 of 1 (nccl)"), std::string::npos) << e.what();
  }
}

TEST(NcclProcessGroup, CollectivesOnGpus) {
  if (auto why = why_no_gpu(); !why.empty()) GTEST_SKIP() << "NCCL GPU test skipped: " << why;
  const int world = std::min(2, tp::cuda_device_count());
  testing::ScratchDir dir;
  const std::string where = "file://" + dir.file("store");
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto g = tp::make_process_group(tp::ProcessGroupOptions()
                                            .with_backend("nccl")
                                            .with_rank(r)
                                            .with_world_size(world)
                                            .with_rendezvous(where)
                                            .with_device(r));
        if (world == 1) g = tp::make_nccl_process_group(nullptr, 0, 1, 0);  // make NCCL itself run
        const auto cuda = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, r);
        at::Tensor t = (at::arange(6, at::kFloat) + 10 * r).to(cuda.device());
        g->all_reduce_sum(t);
        at::Tensor expect = at::zeros({6});
        for (int k = 0; k < world; ++k) expect += at::arange(6, at::kFloat) + 10 * k;
        EXPECT_TRUE(at::equal(t.cpu(), expect));
        at::Tensor part = at::full({2, 3}, static_cast<float>(r), cuda);
        at::Tensor all = g->all_gather(part, -1).cpu();
        ASSERT_EQ(all.sizes(), (std::vector<int64_t>{2, 3 * world}));
        for (int k = 0; k < world; ++k) EXPECT_TRUE(at::equal(all.narrow(1, 3 * k, 3), at::full({2, 3}, float(k))));
        at::Tensor b = at::full({4}, static_cast<float>(r + 1), cuda);
        g->broadcast(b, 0);
        EXPECT_TRUE(at::equal(b.cpu(), at::full({4}, 1.0f)));
        g->barrier();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  if (first) std::rethrow_exception(first);
}

TEST(NcclProcessGroup, EngineOnCudaEqualsTheCpu) {
  if (auto why = why_no_gpu(); !why.empty()) GTEST_SKIP() << "CUDA engine test skipped: " << why;
  testing::ScratchDir dir;
  auto model = testing::tiny_random_model(testing::tiny_tp_llama_config(), 3);
  testing::write_hf_checkpoint(dir.path(), *model);
  testing::TraceBattery b;
  b.prompts = {{5, 9, 13, 17, 21}, {30, 31, 32}};
  b.reads = {"model.layers.1.self_attn.q_proj.output", "model.layers.1.mlp.up_proj.output", "lm_head.output"};
  b.scaled_output = "model.layers.0.self_attn.q_proj";
  b.halved_input = "model.layers.0.self_attn.o_proj";
  b.up = "model.layers.0.mlp.up_proj";
  b.zero_from = 20;
  auto base = EngineArgs().model(dir.path()).kv_cache_memory_mb(8).show_progress(false);
  std::map<std::string, at::Tensor> cpu;
  {
    LanguageModel lm(base);
    cpu = testing::run_trace_battery(lm, b);
  }
  {
    LanguageModel lm(EngineArgs(base).device("cuda"));
    testing::expect_same_results(cpu, testing::run_trace_battery(lm, b), 1e-3);
  }
  if (tp::cuda_device_count() >= 2) {
    LanguageModel lm(EngineArgs(base).device("cuda").tensor_parallel_size(2));
    testing::expect_same_results(cpu, testing::run_trace_battery(lm, b), 1e-3);
  }
}

}  // namespace
}  // namespace nnsight
