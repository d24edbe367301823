// Single-pass capture equals what a trace saves at the same points: each
// captured decoder-layer record of a request equals the trace's save of that
// layer's output at the request's last token of the same step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nnsight/capture.hpp>
#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"

namespace nnsight {
namespace {

TEST(CaptureVersusTrace, RecordsEqualTraceSaves) {
  testing::ScratchDir dir;
  auto model = testing::tiny_llama();
  testing::write_hf_checkpoint(dir.path(), *model);
  const std::string id = "capture-trace-" + std::to_string(::getpid());
  LanguageModel lm(EngineArgs()
                       .model(dir.path())
                       .kv_cache_memory_mb(16)
                       .show_progress(false)
                       .engine_id(id)
                       .capture_enabled(true)
                       .capture_layers("0,1"));
  ActivationReader reader(id);
  const int64_t steps = 4;
  std::vector<std::future<TraceResult>> futures;
  std::vector<std::array<Saved, 2>> saved(6);
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p;
    for (int j = 0; j < 3 + i; ++j) p.push_back(5 + (i * 7 + j * 3) % 80);
    futures.push_back(
        lm.submit(p, SamplingParams().temperature(0).max_tokens(steps).ignore_eos(true), [&, i](Tracer& t) {
          t.all([&](const Step&) {
            saved[i][0] = lm.envoy("model.layers.0").output()[{-1}].save_each();
            saved[i][1] = lm.envoy("model.layers.1").output()[{-1}].save_each();
          });
        }));
  }
  for (int i = 0; i < 6; ++i) {
    TraceResult out = futures[i].get();
    auto records = reader.request(out.output().request_id);
    ASSERT_EQ(records.size(), static_cast<size_t>(2 * steps)) << "request " << i;
    for (const auto& r : records) {
      ASSERT_TRUE(r.layer == 0 || r.layer == 1);
      auto trace_rows = out.list(saved[i][static_cast<size_t>(r.layer)]);
      ASSERT_LT(r.step, static_cast<int64_t>(trace_rows.size()));
      const double diff = (r.value.to(at::kFloat) - trace_rows[static_cast<size_t>(r.step)]).abs().max().item<double>();
      EXPECT_LE(diff, 1e-5) << "request " << i << " layer " << r.layer << " step " << r.step;
    }
  }
}

}  // namespace
}  // namespace nnsight
