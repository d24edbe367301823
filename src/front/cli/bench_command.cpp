// nnsight bench: end-to-end throughput and latency of the engine on
// synthetic prompts (random token ids, seeded), every request submitted at
// once. Prefill throughput = prompt tokens / time until the last request got
// its first token; decode throughput = tokens generated after each request's
// first / time from then to the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>

#include <nlohmann/json.hpp>
#include <nnsight/llm.hpp>

#include "runner/engine/llm_access.h"
#include "core/progress.h"
#include "front/cli/cli_args.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "runner/engine/async_engine.h"

namespace nnsight::cli {

namespace {
const char* kHelp =
    "usage: nnsight bench --model M --num-prompts N --input-len I --output-len O [--max-num-seqs S] [--json]\n"
    "Engine options:\n" NNSIGHT_ENGINE_OPTIONS_HELP;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}
}  // namespace

int bench_command(int argc, char** argv) {
  std::vector<std::string> flags = {"json", "help"};
  for (const auto& f : engine_flag_names()) flags.push_back(f);
  std::vector<std::string> known = {"model", "num-prompts", "input-len", "output-len", "json", "help", "seed"};
  for (const auto& o : engine_option_names()) known.push_back(o);
  for (const auto& f : engine_flag_names()) known.push_back(f);
  CliArgs args(argc, argv, 2, flags, known);
  if (args.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const int64_t n = args.get_int("num-prompts", 8), in_len = args.get_int("input-len", 128),
                out_len = args.get_int("output-len", 128);
  if (n < 1 || in_len < 1 || out_len < 1)
    throw std::invalid_argument("--num-prompts, --input-len and --output-len must be >= 1");

  LLM llm(engine_args_from(args));
  const int64_t vocab = runner::LLMAccess::engine(llm).model_config().vocab_size;
  std::mt19937_64 rng(static_cast<uint64_t>(args.get_int("seed", 0)));
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
  if (args.has("json")) {
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

}  // namespace nnsight::cli
