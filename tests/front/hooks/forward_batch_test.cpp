// current_forward_batch(): a hook can tell which rows of the flat batch
// belong to which request. Checked in a batch that mixes decode rows with
// (chunked) prefill rows: the ranges tile the batch, positions and
// generation steps follow each request's history, and -- the independent
// check -- the rows the hook attributes to a request equal a dense forward
// of that request alone at those positions.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include <nnsight/forward_hook.hpp>

#include "runner/engine/engine.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

struct Seen {
  uint64_t engine_step;
  std::vector<BatchRequest> requests;
  at::Tensor output;  // [num_tokens, hidden]
  int64_t num_tokens;
};
std::vector<Seen>& seen() {
  static std::vector<Seen> s;
  return s;
}

const detail::HookFactoryRegistrar kRecordBatch(
    "test_hooks", "record_batch", [](const nlohmann::json&) -> ForwardHookFn {
      return [](const HookedModule&, const HookValue&, const HookValue& out) -> std::optional<HookValue> {
        auto batch = current_forward_batch();
        EXPECT_TRUE(batch.has_value());
        if (!batch) return std::nullopt;
        Seen s;
        s.engine_step = batch->engine_step();
        s.num_tokens = batch->num_tokens();
        for (size_t i = 0; i < batch->num_requests(); ++i) s.requests.push_back(batch->request(i));
        EXPECT_THROW(batch->request(batch->num_requests()), std::out_of_range);
        // request_of_row and find agree with the list.
        for (const auto& r : s.requests) {
          for (int64_t row = r.token_start; row < r.token_start + r.num_tokens; ++row) {
            auto owner = batch->request_of_row(row);
            EXPECT_TRUE(owner && owner->request_id == r.request_id);
          }
          auto found = batch->find(r.request_id);
          EXPECT_TRUE(found && found->token_start == r.token_start);
        }
        EXPECT_FALSE(batch->request_of_row(s.num_tokens).has_value());
        EXPECT_FALSE(batch->find(999999).has_value());
        s.output = out.tensor().clone();
        seen().push_back(std::move(s));
        return std::nullopt;
      };
    });

TEST(ForwardBatch, OutsideAForwardThereIsNone) { EXPECT_FALSE(current_forward_batch().has_value()); }

TEST(ForwardBatch, MixedPrefillDecodeRowsBelongToTheRightRequests) {
  seen().clear();
  auto model = testing::tiny_llama();
  const auto params = testing::parameters_of(*model);
  // A small token budget forces chunked prefill next to running decodes.
  EngineArgs args = EngineArgs()
                        .kv_cache_memory_mb(4)
                        .show_progress(false)
                        .max_num_batched_tokens(12)
                        .enable_prefix_caching(false)
                        .forward_hooks(R"([{"name": "rows", "target_modules": ["model.norm"],
                                            "hook_factory": "test_hooks:record_batch"}])");
  auto engine = testing::tiny_engine(args, model);
  auto request = [](int len, int seed, int64_t max_tokens) {
    runner::RequestInput in;
    for (int j = 0; j < len; ++j) in.prompt_token_ids.push_back(3 + (seed * 17 + j * 5) % 90);
    in.params = SamplingParams().temperature(0).max_tokens(max_tokens).ignore_eos(true);
    return in;
  };
  std::map<uint64_t, RequestOutput> done;
  std::vector<uint64_t> ids = {engine->add_request(request(5, 1, 8))};
  for (int i = 0; i < 2; ++i)
    for (auto& o : engine->step())
      if (o.finished) done[o.request_id] = o;
  ids.push_back(engine->add_request(request(30, 2, 4)));  // prefills in chunks while request 1 decodes
  ids.push_back(engine->add_request(request(9, 3, 5)));
  for (auto& [id, o] : testing::run_to_completion(*engine)) done[id] = o;

  std::map<uint64_t, std::vector<int32_t>> sequence;  // prompt + generated tokens
  std::vector<std::vector<int32_t>> prompts = {request(5, 1, 8).prompt_token_ids, request(30, 2, 4).prompt_token_ids,
                                               request(9, 3, 5).prompt_token_ids};
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(done.count(ids[i]));
    sequence[ids[i]] = prompts[i];
    for (int32_t t : done[ids[i]].token_ids) sequence[ids[i]].push_back(t);
  }
  std::map<uint64_t, at::Tensor> dense;  // [len, hidden] final-norm output of each request alone
  for (auto& [id, toks] : sequence) {
    std::vector<int64_t> t(toks.begin(), toks.end());
    dense[id] = testing::dense_reference(model->config(), params, t).hidden;
  }

  std::map<uint64_t, int64_t> computed, generated;  // each request's history, as the test tracks it
  bool mixed = false;
  ASSERT_FALSE(seen().empty());
  for (const Seen& s : seen()) {
    int64_t next_row = 0;
    bool has_decode = false, has_prefill = false;
    for (const BatchRequest& r : s.requests) {
      SCOPED_TRACE("step " + std::to_string(s.engine_step) + " request " + std::to_string(r.request_id));
      ASSERT_TRUE(sequence.count(r.request_id));
      EXPECT_EQ(r.token_start, next_row);  // ranges tile the batch in order
      next_row += r.num_tokens;
      EXPECT_EQ(r.first_position, computed[r.request_id]);
      EXPECT_EQ(r.generation_step, generated[r.request_id]);
      if (r.generation_step > 0)
        has_decode = true;
      else
        has_prefill = true;
      // The rows the hook got for this request are that request's own values.
      at::Tensor rows = s.output.narrow(0, r.token_start, r.num_tokens);
      at::Tensor expected = dense[r.request_id].narrow(0, r.first_position, r.num_tokens);
      EXPECT_LT((rows - expected).abs().max().item<double>(), 1e-4);
      computed[r.request_id] += r.num_tokens;
      if (r.samples) generated[r.request_id] += 1;
    }
    EXPECT_EQ(next_row, s.num_tokens);
    if (has_decode && has_prefill) mixed = true;
  }
  EXPECT_TRUE(mixed) << "the scenario must produce a step with both prefill and decode rows";
  // Every request was computed up to its last token (the last sampled token is never fed back).
  for (auto& [id, toks] : sequence) EXPECT_EQ(computed[id], static_cast<int64_t>(toks.size()) - 1);
}

}  // namespace
}  // namespace nnsight
