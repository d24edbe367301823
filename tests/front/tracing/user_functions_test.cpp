// User functions (include/nnsight/functions.hpp): registered in process they
// run in `apply` nodes; the names are in the model's structure, so a graph
// naming anything else is refused before it runs, at the user's line; a
// plugin library registers them in worker processes, also at TP=2.
#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

const testing::ScratchDir& checkpoint() {
  static testing::ScratchDir* dir = [] {
    auto* d = new testing::ScratchDir();
    testing::write_hf_checkpoint(d->path(), *testing::tiny_random_model(testing::tiny_tp_llama_config(), 7));
    return d;
  }();
  return *dir;
}

EngineArgs args() { return EngineArgs().model(checkpoint().path()).kv_cache_memory_mb(8).show_progress(false); }

const std::vector<int32_t> kPrompt = {5, 9, 13, 2, 40};

// Saves of layer 1's MLP output and of `fn` applied to it.
std::pair<at::Tensor, at::Tensor> run(LanguageModel& lm, const std::string& fn) {
  Saved plain, applied;
  auto out = lm.trace(kPrompt, SamplingParams().max_tokens(1), [&](Tracer&) {
    Proxy h = lm.envoy("model.layers.1.mlp").output();
    plain = h.save();
    applied = apply(fn, {h}).save();
  });
  return {out[plain], out[applied]};
}

TEST(UserFunctions, RegisteredInProcessRunInTraces) {
  register_function("test.scale_and_shift", 3, [](const std::vector<at::Tensor>& a) { return a[0] * a[1] + a[2]; });
  EXPECT_NE(std::find(registered_functions().begin(), registered_functions().end(), "test.scale_and_shift"),
            registered_functions().end());
  LanguageModel lm(args());
  Saved h, y;
  auto out = lm.trace(kPrompt, SamplingParams().max_tokens(1), [&](Tracer&) {
    Proxy v = lm.envoy("model.layers.1.mlp").output();
    h = v.save();
    y = apply("test.scale_and_shift", {v, 3.0, 0.5}).save();
  });
  EXPECT_TRUE(at::allclose(out[y], out[h] * 3.0 + 0.5));
}

TEST(UserFunctions, AnUnknownNameIsRefusedBeforeTheRunAtTheUsersLine) {
  LanguageModel lm(args());
  try {
    lm.trace(kPrompt, SamplingParams().max_tokens(1),
             [&](Tracer&) { apply("test.no_such_function", {lm.envoy("model.layers.1.mlp").output()}).save(); });
    FAIL() << "an unregistered function must be refused";
  } catch (const TraceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("user_functions_test.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("function 'test.no_such_function' is not registered"), std::string::npos) << msg;
  }
}

TEST(UserFunctions, APluginLibraryRegistersThemInWorkerProcessesAndUnderTensorParallelism) {
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    LanguageModel lm(args().executor("mp").tensor_parallel_size(tp).function_plugins(NNSIGHT_TEST_PLUGIN));
    auto [h, y] = run(lm, "test_plugin.affine");
    EXPECT_TRUE(at::allclose(y, h * 2 + 1));
  }
  // A library that cannot be loaded fails start-up naming it.
  try {
    LanguageModel lm(args().executor("mp").function_plugins("/no/such/libfn.so"));
    FAIL() << "a missing plugin must fail start-up";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/libfn.so"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nnsight
