// nnsight::request_interrupt (include/nnsight/interrupt.hpp), what a notebook
// kernel calls on SIGINT: a trace submitted before the interrupt throws
// Interrupted when it is collected (its requests aborted), one submitted after
// it is unaffected, and the engine keeps serving with unchanged results.
#include <gtest/gtest.h>

#include <thread>

#include <nnsight/interrupt.hpp>
#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_llama_suite.h"

namespace nnsight {
namespace {

class Interrupt : public testing::TinyLlamaSuite<Interrupt> {
 protected:
  static SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }
  static std::vector<int32_t> prompt() { return {5, 9, 14, 20, 33}; }
  // A trace that saves layer 0's output at every step.
  static TraceFuture submit(int64_t tokens, Saved& h) {
    return lm_->submit(prompt(), greedy(tokens), [&](Tracer& t) {
      t.all([&](const Step&) { h = lm_->envoy("model.layers.0").output().save(); });
    });
  }
};

TEST_F(Interrupt, SubmittedTraceThrowsAndTheEngineKeepsServing) {
  Saved h;
  TraceResult before = submit(40, h).get();
  ASSERT_EQ(before.output().token_ids.size(), 40u);

  Saved h2;
  auto interrupted = submit(40, h2);
  request_interrupt();
  EXPECT_THROW(interrupted.get(), Interrupted);

  Saved h3;
  TraceResult after = submit(40, h3).get();  // submitted after the interrupt: unaffected
  EXPECT_EQ(after.output().token_ids, before.output().token_ids);
  EXPECT_TRUE(after[h3].equal(before[h]));
}

TEST_F(Interrupt, WaitingTraceIsStoppedFromAnotherThread) {
  Saved h;
  auto pending = submit(100, h);
  std::thread other([] { nnsight::request_interrupt(); });  // may land before or during get()
  try {
    pending.get();
    ADD_FAILURE() << "the trace was not interrupted";
  } catch (const Interrupted& e) {
    EXPECT_NE(std::string(e.what()).find("interrupted"), std::string::npos);
  }
  other.join();
  Saved h2;
  EXPECT_EQ(lm_->trace(prompt(), greedy(3), [&](Tracer&) { h2 = lm_->logits().save(); }).output().token_ids.size(), 3u);
}

TEST_F(Interrupt, CLinkageEntryPointInterrupts) {
  Saved h;
  auto pending = submit(10, h);
  nnsight_request_interrupt();
  EXPECT_THROW(pending.get(), Interrupted);
}

}  // namespace
}  // namespace nnsight
