// Scheduler: token and sequence budgets, chunked prefill, group admission,
// preemption order, the whole-generation reservation of traced requests, and
// the refusal of groups that can never run.
#include "runner/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

using runner::RequestPtr;
using runner::Scheduler;
using runner::SchedulerConfig;

RequestPtr request(uint64_t id, int64_t prompt_len, int64_t max_tokens = 4, const std::string& group = "",
                   bool traced = false) {
  auto r = std::make_shared<runner::Request>();
  r->id = id;
  r->arrival = id;
  r->prompt_token_ids.resize(static_cast<size_t>(prompt_len));
  std::iota(r->prompt_token_ids.begin(), r->prompt_token_ids.end(), static_cast<int32_t>(id * 100));
  r->params.max_tokens(max_tokens).ignore_eos(true);
  if (!group.empty()) r->params.group_id(group);
  if (traced) r->params.payload("graph").allow_chunking(false).prefix_caching(false);
  return r;
}

// Tokens each request computes in one step, by id.
std::map<uint64_t, int64_t> counts(const runner::SchedulerOutput& out) {
  std::map<uint64_t, int64_t> m;
  for (const auto& s : out.scheduled) m[s.id] = s.num_new();
  return m;
}

// Runs one step: every sampling slot gets token 7 back from the "worker".
runner::SchedulerOutput step(Scheduler& s) {
  runner::SchedulerOutput out = s.schedule();
  runner::ModelRunnerOutput res;
  for (const auto& slot : out.scheduled)
    if (slot.sample) res.sampled.push_back(runner::SampledToken{slot.id, 7});
  s.update(out, res);
  return out;
}

SchedulerConfig config(int64_t tokens, int64_t seqs, int64_t blocks = 64, int64_t block_size = 4) {
  SchedulerConfig c;
  c.max_num_batched_tokens = tokens;
  c.max_num_seqs = seqs;
  c.num_blocks = blocks;
  c.block_size = block_size;
  c.max_model_len = 1024;
  return c;
}

TEST(Scheduler, TokenBudgetChunksTheLastAdmittedPrefill) {
  Scheduler s(config(8, 16));
  s.add(request(1, 5));
  s.add(request(2, 5));
  s.add(request(3, 5));
  runner::SchedulerOutput out = step(s);
  EXPECT_EQ(counts(out), (std::map<uint64_t, int64_t>{{1, 5}, {2, 3}}));
  EXPECT_TRUE(out.scheduled[0].sample);
  EXPECT_FALSE(out.scheduled[1].sample) << "a chunk that does not reach the prompt's end does not sample";
  // Running requests go first: 1 decodes, 2 finishes its prompt, 3 gets what is left.
  out = step(s);
  EXPECT_EQ(counts(out), (std::map<uint64_t, int64_t>{{1, 1}, {2, 2}, {3, 5}}));
  EXPECT_EQ(out.scheduled[1].num_computed, 3);
}

TEST(Scheduler, SequenceBudget) {
  Scheduler s(config(100, 2));
  for (uint64_t id = 1; id <= 3; ++id) s.add(request(id, 3));
  runner::SchedulerOutput out = step(s);
  EXPECT_EQ(counts(out), (std::map<uint64_t, int64_t>{{1, 3}, {2, 3}}));
  EXPECT_EQ(s.num_waiting(), 1u);
}

TEST(Scheduler, ChunkedPrefillInBudgetSizedPieces) {
  Scheduler s(config(4, 4));
  s.add(request(1, 10));
  std::vector<int64_t> chunks, computed;
  std::vector<bool> samples;
  for (int i = 0; i < 3; ++i) {
    runner::SchedulerOutput out = step(s);
    ASSERT_EQ(out.scheduled.size(), 1u);
    chunks.push_back(out.scheduled[0].num_new());
    computed.push_back(out.scheduled[0].num_computed);
    samples.push_back(out.scheduled[0].sample);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(computed, (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(samples, (std::vector<bool>{false, false, true}));
}

TEST(Scheduler, UnchunkableGroupIsAdmittedWholeOrNotAtAll) {
  Scheduler s(config(10, 8));
  s.add(request(1, 4));
  s.add(request(2, 4, 4, "trace:1", true));
  s.add(request(3, 4, 4, "trace:1", true));
  // Budget 10: request 1 takes 4; the group needs 8 in one step and waits.
  runner::SchedulerOutput out = step(s);
  EXPECT_EQ(counts(out), (std::map<uint64_t, int64_t>{{1, 4}}));
  // 1 decodes (1 token); 9 left: both invokes now run in the same step.
  out = step(s);
  EXPECT_EQ(counts(out), (std::map<uint64_t, int64_t>{{1, 1}, {2, 4}, {3, 4}}));
  EXPECT_EQ(out.new_requests.size(), 2u);
}

TEST(Scheduler, PreemptsTheLatestArrivalAndRequeuesItInOrder) {
  // 6 blocks of 2 tokens. Three requests of 3 tokens take 2 blocks each.
  Scheduler s(config(64, 8, /*blocks=*/6, /*block_size=*/2));
  for (uint64_t id = 1; id <= 3; ++id) s.add(request(id, 3, 8));
  step(s);  // prefill: 6 blocks used
  // Decode: position 3 fits in block 2 of each; the next position needs a third block.
  step(s);
  runner::SchedulerOutput out = s.schedule();
  // Request 1 needs a block: the latest arrival (3) is preempted, then 2 would be next.
  EXPECT_EQ(s.num_preemptions(), 1);
  EXPECT_EQ(out.preempted_ids, (std::vector<uint64_t>{3}));
  EXPECT_EQ(counts(out).count(3), 0u);
  EXPECT_EQ(s.get(3)->num_computed, 0) << "a preempted request is recomputed from scratch";
  EXPECT_TRUE(s.get(3)->preempted);
}

TEST(Scheduler, TracedRequestReservesItsWholeGenerationAndIsNeverPreempted) {
  Scheduler s(config(64, 8, /*blocks=*/6, /*block_size=*/2));
  s.add(request(1, 3, 5, "trace:9", true));  // 3 + 5 tokens: 4 blocks at admission
  step(s);
  EXPECT_EQ(s.blocks().num_free(), 2);
  s.add(request(2, 3, 8));  // plain: 2 blocks now, more later
  step(s);
  for (int i = 0; i < 3; ++i) step(s);  // request 2 runs out of blocks: it alone is preempted
  EXPECT_GE(s.num_preemptions(), 1);
  EXPECT_EQ(s.get(1)->num_preemptions, 0);
}

TEST(Scheduler, GroupThatCanNeverRunIsRefusedNamingTheLimit) {
  Scheduler s(config(16, 2, /*blocks=*/8, /*block_size=*/4));
  auto a = request(1, 4, 4, "g", true), b = request(2, 4, 4, "g", true), c = request(3, 4, 4, "g", true);
  try {
    s.check_group({a.get(), b.get(), c.get()});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("max_num_seqs is 2"), std::string::npos) << e.what();
  }
  Scheduler t(config(6, 8));
  try {
    t.check_group({a.get(), b.get()});  // 8 unchunkable tokens, budget 6
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("max_num_batched_tokens is 6"), std::string::npos) << e.what();
  }
  Scheduler u(config(64, 8, /*blocks=*/3, /*block_size=*/4));
  try {
    u.check_group({a.get(), b.get()});  // 2 x (4 + 4) tokens = 4 blocks, cache holds 3
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the cache holds 3"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(s.check_group({a.get(), b.get()}));
}

TEST(Scheduler, NeverSpinsOnAGroupThatCannotBeAdmitted) {
  Scheduler s(config(64, 2));
  // Bypassing check_group (as a bug would): the scheduler fails the group instead of waiting for ever.
  for (uint64_t id = 1; id <= 3; ++id) s.add(request(id, 2, 2, "big", true));
  runner::SchedulerOutput out = s.schedule();
  EXPECT_TRUE(out.scheduled.empty());
  auto failed = s.take_unschedulable();
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_NE(failed[0]->error.find("can never be scheduled"), std::string::npos) << failed[0]->error;
  EXPECT_FALSE(s.has_unfinished());
  s.add(request(4, 2));
  EXPECT_EQ(counts(step(s)), (std::map<uint64_t, int64_t>{{4, 2}})) << "later requests are served";
}

}  // namespace
}  // namespace nnsight

namespace nnsight {
namespace {

TEST(Scheduler, GradientGroupsRunInStepsOfTheirOwn) {
  Scheduler s(config(64, 16));
  s.add(request(1, 4, 3));  // plain
  auto g1 = request(2, 3, 2, "trace:a", true), g2 = request(3, 2, 2, "trace:a", true);
  g1->params.gradients(true);
  g2->params.gradients(true);
  s.add(g1);
  s.add(g2);
  auto g3 = request(4, 2, 1, "trace:b", true);  // a second gradient trace waits for the first
  g3->params.gradients(true);
  s.add(g3);
  s.add(request(5, 2, 2));  // plain, behind a gradient group in the queue
  std::vector<std::map<uint64_t, int64_t>> steps;
  // The worker finishes a request when it reaches max_tokens (as the model runner does).
  auto step_finishing = [&] {
    runner::SchedulerOutput out = s.schedule();
    runner::ModelRunnerOutput res;
    for (const auto& slot : out.scheduled) {
      if (!slot.sample) continue;
      res.sampled.push_back(runner::SampledToken{slot.id, 7});
      if (slot.num_generated + 1 >= s.get(slot.id)->params.max_tokens())
        res.finished.push_back(runner::FinishedRequest{slot.id, FinishReason::kLength});
    }
    s.update(out, res);
    return out;
  };
  for (int i = 0; i < 16 && s.has_unfinished(); ++i) steps.push_back(counts(step_finishing()));
  auto is_grad = [](uint64_t id) { return id >= 2 && id <= 4; };
  for (size_t i = 0; i < steps.size(); ++i) {
    bool grad = false, plain = false;
    for (const auto& [id, n] : steps[i]) (is_grad(id) ? grad : plain) = true;
    EXPECT_FALSE(grad && plain) << "step " << i << " mixes gradient and plain requests";
    EXPECT_FALSE(steps[i].count(4) && (steps[i].count(2) || steps[i].count(3))) << "two gradient traces in step " << i;
  }
  // Both kinds make progress, alternating: 1 alone, then trace a's invokes together, then 1 and 5, ...
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps[0], (std::map<uint64_t, int64_t>{{1, 4}}));
  EXPECT_EQ(steps[1], (std::map<uint64_t, int64_t>{{2, 3}, {3, 2}}));
  EXPECT_EQ(steps[2], (std::map<uint64_t, int64_t>{{1, 1}}));  // 5 waits behind trace b (first come, first served)
  bool ran4 = false, ran5 = false;
  for (const auto& st : steps) {
    ran4 = ran4 || st.count(4);
    ran5 = ran5 || st.count(5);
  }
  EXPECT_TRUE(ran4 && ran5);
}

}  // namespace
}  // namespace nnsight
