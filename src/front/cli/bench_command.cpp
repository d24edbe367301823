// nnsight bench: end-to-end throughput and latency of the engine on
// synthetic prompts (random token ids, seeded), every request submitted at
// once. Prefill throughput = prompt tokens / time until the last request got
// its first token; decode throughput = tokens generated after each request's
// first / time from then to the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>

#include <nlohmann/json.hpp>
#include <nnsight/llm.hpp>

#include "runner/engine/llm_access.h"
#include "core/progress.h"
#include "front/cli/cli_options.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "runner/engine/async_engine.h"

namespace nnsight::cli {

namespace {
struct BenchOptions {
  int64_t num_prompts = 8, input_len = 128, output_len = 128, seed = 0;
  bool json = false;
  EngineOptions engine;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

int run(const CLI::App& cmd, const BenchOptions& o) {
  const int64_t n = o.num_prompts, in_len = o.input_len, out_len = o.output_len;
  LLM llm(engine_args_from(cmd, o.engine));
  const int64_t vocab = runner::LLMAccess::engine(llm).model_config().vocab_size;
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed));
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(vocab - 1));
  SamplingParams params = SamplingParams().temperature(0).max_tokens(out_len).ignore_eos(true);

  using clock = std::chrono::steady_clock;
  std::mutex mu;
  std::vector<double> first_token(static_cast<size_t>(n), -1), done_at(static_cast<size_t>(n), -1);
  ProgressBar bar("bench", n * out_len);
  std::vector<LLM::Handle> handles;
  const auto t0 = clock::now();
  auto since = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(in_len));
    for (auto& t : prompt) t = tok(rng);
    size_t seen = 0;
    handles.push_back(llm.submit(prompt, params, [&, i, seen](const RequestOutput& o) mutable {
      std::lock_guard<std::mutex> lock(mu);
      if (first_token[static_cast<size_t>(i)] < 0 && !o.token_ids.empty())
        first_token[static_cast<size_t>(i)] = since();
      if (o.finished) done_at[static_cast<size_t>(i)] = since();
      bar.advance(static_cast<int64_t>(o.token_ids.size() - seen));
      seen = o.token_ids.size();
    }));
  }
  int64_t generated = 0;
  for (auto& h : handles) {
    auto o = h.result.get();
    if (!o.error.empty()) throw std::runtime_error("request failed: " + o.error);
    generated += static_cast<int64_t>(o.token_ids.size());
  }
  const double total = since();
  bar.done();
  const double last_first = *std::max_element(first_token.begin(), first_token.end());
  const double prefill_tps = static_cast<double>(n * in_len) / last_first;
  const double decode_tps = static_cast<double>(generated - n) / std::max(1e-9, total - last_first);
  std::vector<double> latency = done_at;
  nlohmann::json j = {{"num_prompts", n},
                      {"input_len", in_len},
                      {"output_len", out_len},
                      {"total_s", total},
                      {"prefill_tokens_per_s", prefill_tps},
                      {"decode_tokens_per_s", decode_tps},
                      {"latency_p50_s", percentile(latency, 0.5)},
                      {"latency_p99_s", percentile(latency, 0.99)},
                      {"ttft_p50_s", percentile(first_token, 0.5)}};
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("requests: %lld x (%lld in, %lld out)   total %.2f s\n", static_cast<long long>(n),
                static_cast<long long>(in_len), static_cast<long long>(out_len), total);
    std::printf("prefill: %.1f tokens/s   decode: %.1f tokens/s\n", prefill_tps, decode_tps);
    std::printf("latency: p50 %.3f s   p99 %.3f s   (time to first token p50 %.3f s)\n",
                j["latency_p50_s"].get<double>(), j["latency_p99_s"].get<double>(), j["ttft_p50_s"].get<double>());
  }
  return 0;
}

}  // namespace

RunCommand add_bench_command(CLI::App& root) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App& cmd = *root.add_subcommand("bench", "measure prefill/decode throughput and latency on random prompts");
  add_integer(cmd, "--num-prompts", o->num_prompts, "requests, all submitted at once", 1);
  add_integer(cmd, "--input-len", o->input_len, "prompt tokens each", 1);
  add_integer(cmd, "--output-len", o->output_len, "generated tokens each", 1);
  add_integer(cmd, "--seed", o->seed, "seed of the random prompts", 0);
  cmd.add_flag("--json", o->json, "print one JSON object");
  add_engine_options(cmd, o->engine);
  return [&cmd, o] { return run(cmd, *o); };
}

}  // namespace nnsight::cli
