#include "support/trace_beside.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>

#include "front/trace_client/graph_file.h"
#include "front/trace_client/graph_trace.h"
#include "support/tiny_engine.h"

namespace nnsight::testing {

TraceBeside run_trace_beside(runner::Engine& engine, const runner::ModelRunner& runner,
                             const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                             const std::string& graph, int64_t traced_max_tokens, bool join_midway) {
  const auto add_plain = [&](const std::vector<int32_t>& p) {
    runner::RequestInput in;
    in.prompt_token_ids = p;
    in.params = SamplingParams().temperature(0).max_tokens(max_tokens).ignore_eos(true);
    return engine.add_request(std::move(in));
  };
  const auto add_traced = [&] {
    std::vector<runner::RequestInput> traced_prompt(1);
    traced_prompt[0].prompt_token_ids = {9, 8, 7, 6};
    auto traced = tracing::prepare_graph_trace(
        engine.model_structure(), std::move(traced_prompt), {tracing::parse_graph_file("trace.json", graph)},
        SamplingParams().temperature(0).max_tokens(traced_max_tokens).ignore_eos(true), tracing::next_trace_id());
    return engine.add_request(std::move(traced.requests[0]));
  };
  std::vector<uint64_t> ids;
  std::map<uint64_t, RequestOutput> done;
  if (!join_midway) {
    for (const auto& p : prompts) ids.push_back(add_plain(p));
    ids.push_back(add_traced());
    done = run_to_completion(engine);
  } else {
    const uint64_t traced = add_traced();
    for (const auto& p : prompts) {
      for (auto& o : engine.step())
        if (o.finished) done[o.request_id] = o;
      ids.push_back(add_plain(p));
    }
    for (auto& [id, o] : run_to_completion(engine)) done[id] = o;
    ids.push_back(traced);
  }
  TraceBeside out;
  for (uint64_t id : ids) {
    EXPECT_EQ(done.at(id).error, "");
    out.tokens.push_back(done.at(id).token_ids);
  }
  const auto& saves = done.at(ids.back()).saves;
  EXPECT_EQ(saves.count("h"), 1u);
  if (saves.count("h")) out.saved = at::cat(saves.at("h").list, 0).to(at::kFloat);
  if (const runner::DecodeGraphs* g = runner.decode_graphs()) {
    out.replays = g->replays();
    out.hooked_replays = g->hooked_replays();
  }
  return out;
}

std::string save_every_step(const std::string& key) {
  return "{\"nodes\": [{\"kind\": \"iter\", \"start\": 0, \"stop\": \"all\"}, "
         "{\"kind\": \"get\", \"key\": \"" +
         key +
         "\", \"step\": {\"iter\": 0}}, "
         "{\"kind\": \"save\", \"name\": \"h\", \"args\": [1], \"mode\": \"append\"}, {\"kind\": \"end\"}]}";
}

}  // namespace nnsight::testing
