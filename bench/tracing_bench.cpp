// tracing_bench: what tracing costs, each as a ratio to the untraced run
// measured in the same process, alternating the variants so machine noise
// hits them alike.
//   1. fixed overhead of a 1-token trace saving the logits (a tiny random
//      model, so the microseconds are visible), in microseconds added;
//   2. decode throughput of the default model with 16 concurrent requests
//      (the variants in turn, round after round; median of per-round ratios):
//      untraced / each trace saving one layer every step / all 30 layers /
//      steering (adding a vector to one layer) every step;
//   3. the hook branch every module call pays when nothing is attached,
//      against a call without it (Module::invoke vs the body alone);
//   4. an attention pattern at a long context (docs/attention-internals.md):
//      a request of --attn-context prompt tokens beside --attn-requests
//      plain ones of the same length, untraced, against the same batch where
//      the first request's trace reads one layer's pattern at every step;
//      the prefill step and the decode steps apart, timed by a companion's
//      stream (each new token ends one step of the whole batch).
//
//   tracing_bench [--model PATH] [--requests 16] [--tokens 32] [--reps 3]
//                 [--only 1|2|3|4] [--overhead-reps 2000] [--variants MASK]
//                 [--overhead-side plain|traced] [--attn-context 1000]
//                 [--attn-requests 1] [--attn-tokens 16]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include <nnsight/nnsight.hpp>

#include "core/module.h"
#include "support/bench_support.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

using namespace nnsight;
using clock_type = std::chrono::steady_clock;

namespace {

double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int64_t len, int64_t vocab) {
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = tok(rng);
  return p;
}

// A module whose forward is one cheap op: the hook branch is all that differs.
class Plain : public Module {
 public:
  Plain() : Module("Plain") {}
  at::Tensor forward(const at::Tensor& x) {
    return invoke(x, [](const at::Tensor& t) { return t; });
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = bench::default_model_path();
  std::string overhead_side;
  int64_t requests = 16, tokens = 32, reps = 3, only = 0, overhead_reps = 2000, variant_mask = 15;
  int64_t attn_context = 1000, attn_requests = 1, attn_tokens = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      model_path = v;
    else if (a == "--requests")
      requests = std::stoll(v);
    else if (a == "--tokens")
      tokens = std::stoll(v);
    else if (a == "--reps")
      reps = std::stoll(v);
    else if (a == "--only")
      only = std::stoll(v);  // run one section (1, 2 or 3)
    else if (a == "--overhead-reps")
      overhead_reps = std::stoll(v);
    else if (a == "--overhead-side")
      overhead_side = v;  // "plain" or "traced": time one side only (profiling)
    else if (a == "--variants")
      variant_mask = std::stoll(v);  // bit mask over section 2's four variants
    else if (a == "--attn-context")
      attn_context = std::stoll(v);
    else if (a == "--attn-requests")
      attn_requests = std::stoll(v);
    else if (a == "--attn-tokens")
      attn_tokens = std::stoll(v);
  }
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));

  // ---- 3. the hook branch
  if (only == 0 || only == 3) {
    Plain m;
    at::Tensor x = at::zeros({1});
    const int n = 2'000'000;
    double with_branch = 1e30, without = 1e30;
    for (int r = 0; r < 5; ++r) {
      auto t0 = clock_type::now();
      for (int i = 0; i < n; ++i) x = m.forward(x);
      with_branch = std::min(with_branch, since(t0) / n);
      t0 = clock_type::now();
      for (int i = 0; i < n; ++i) x = [](const at::Tensor& t) { return t; }(x);
      without = std::min(without, since(t0) / n);
    }
    std::printf(
        "hook branch: %.2f ns per module call with the branch, %.2f ns without; "
        "x 420 module calls per decode step = %.2f us\n",
        with_branch * 1e9, without * 1e9, (with_branch - without) * 420 * 1e6);
  }

  // ---- 1. fixed overhead of a one-token trace saving the logits, on a tiny
  // random Llama served in process: its forward takes tens of microseconds,
  // so what tracing adds is not lost in the model's own time.
  if (only == 0 || only == 1) {
    testing::ScratchDir dir;
    auto tiny = testing::tiny_llama();
    testing::write_hf_checkpoint(dir.path(), *tiny);
    LanguageModel small(EngineArgs().model(dir.path()).kv_cache_memory_mb(16).show_progress(false));
    const std::vector<int32_t> p = {5, 9, 13, 17};
    auto params = SamplingParams().temperature(0).max_tokens(1);
    std::vector<double> plain, traced;
    for (int64_t r = 0; r < overhead_reps + 100; ++r) {
      auto t0 = clock_type::now();
      if (overhead_side != "traced") small.llm().submit(p, params).result.get();
      if (r >= 100) plain.push_back(since(t0));
      Saved s;
      t0 = clock_type::now();
      if (overhead_side != "plain") small.trace(p, params, [&](Tracer&) { s = small.logits().save(); });
      if (r >= 100) traced.push_back(since(t0));
    }
    std::sort(plain.begin(), plain.end());
    std::sort(traced.begin(), traced.end());
    const double a = plain[plain.size() / 2], b = traced[traced.size() / 2];
    std::printf(
        "one-token request, tiny model (median of %zu, alternating): untraced %.1f us, traced saving "
        "logits %.1f us: +%.1f us (ratio %.3f)\n",
        plain.size(), a * 1e6, b * 1e6, (b - a) * 1e6, b / a);
  }

  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x.size() % 2 ? x[x.size() / 2] : 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
  };

  // ---- 4. one layer's attention pattern at a long context
  if (only == 0 || only == 4) {
    LanguageModel lm(EngineArgs().model(model_path).show_progress(false).enable_prefix_caching(false));
    std::mt19937_64 rng(4);
    std::vector<std::vector<int32_t>> prompts;  // [0]: traced or not; the rest plain companions
    for (int64_t i = 0; i <= attn_requests; ++i) prompts.push_back(random_prompt(rng, attn_context, 49152));
    const std::string point = "model.layers.15.self_attn.pattern";
    // One run of the batch, request 0 traced or not. The steps are timed by
    // the first companion's stream: its first token ends the prefill step,
    // each later one a decode step of the whole batch.
    auto run = [&](bool traced, double& prefill, std::vector<double>& steps) {
      const auto params = SamplingParams().temperature(0).max_tokens(1 + attn_tokens).ignore_eos(true);
      std::vector<clock_type::time_point> stamps;
      std::mutex mu;
      auto t0 = clock_type::now();
      std::future<TraceResult> f;
      if (traced)
        f = lm.submit(prompts[0], params,
                      [&](Tracer& t) { t.all([&](const Step&) { lm.envoy(point).output().save_each(); }); });
      std::vector<LLM::Handle> hs;
      if (!traced) hs.push_back(lm.llm().submit(prompts[0], params));
      for (size_t i = 1; i < prompts.size(); ++i)
        hs.push_back(lm.llm().submit(prompts[i], params, [&, i](const RequestOutput& o) {
          std::lock_guard<std::mutex> lock(mu);
          if (i == 1 && o.token_ids.size() > stamps.size()) stamps.push_back(clock_type::now());
        }));
      for (auto& h : hs) h.result.get();
      if (f.valid()) f.get();
      prefill = std::chrono::duration<double>(stamps.front() - t0).count();
      for (size_t k = 1; k < stamps.size(); ++k)
        steps.push_back(std::chrono::duration<double>(stamps[k] - stamps[k - 1]).count());
    };
    std::vector<double> prefill[2], step[2], prefill_ratio, step_ratio;
    for (int64_t r = 0; r < reps; ++r) {
      for (int traced = 0; traced < 2; ++traced) {
        double p = 0;
        std::vector<double> steps;
        run(traced == 1, p, steps);
        prefill[traced].push_back(p);
        step[traced].push_back(median(steps));
      }
      prefill_ratio.push_back(prefill[1].back() / prefill[0].back());
      step_ratio.push_back(step[1].back() / step[0].back());
    }
    std::printf(
        "attention pattern of one layer, %lld request(s) of %lld-token prompts, the first traced or not, %lld rounds "
        "(medians): prefill step untraced %.3f s, traced %.3f s (ratio %.3f); decode step untraced %.2f ms, traced "
        "%.2f ms (ratio %.3f)\n",
        static_cast<long long>(attn_requests + 1), static_cast<long long>(attn_context), static_cast<long long>(reps),
        median(prefill[0]), median(prefill[1]), median(prefill_ratio), median(step[0]) * 1e3, median(step[1]) * 1e3,
        median(step_ratio));
  }

  // ---- 2. decode throughput with concurrent traces
  if (only != 0 && only != 2) return 0;
  LanguageModel lm(EngineArgs().model(model_path).show_progress(false).max_num_seqs(64).enable_prefix_caching(false));
  const int64_t vocab = 49152, hidden = 576;
  std::mt19937_64 rng(3);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < requests; ++i) prompts.push_back(random_prompt(rng, 32, vocab));
  at::Tensor steer = at::randn({hidden}) * 0.5;
  enum Variant { kUntraced, kOneLayer, kAllLayers, kSteering };
  const char* names[] = {"untraced", "save 1 layer/step", "save 30 layers/step", "steer 1 layer/step"};
  // One run of a variant generating `n` tokens per request; wall seconds.
  auto run = [&](Variant v, int64_t n) {
    const auto params_n = SamplingParams().temperature(0).max_tokens(n).ignore_eos(true);
    auto t0 = clock_type::now();
    std::vector<std::future<TraceResult>> fs;
    std::vector<LLM::Handle> hs;
    for (const auto& p : prompts) {
      if (v == kUntraced) {
        hs.push_back(lm.llm().submit(p, params_n));
        continue;
      }
      fs.push_back(lm.submit(p, params_n, [&, v](Tracer& t) {
        t.all([&](const Step&) {
          if (v == kOneLayer) lm.envoy("model.layers.15").output().save_each();
          if (v == kAllLayers)
            for (int l = 0; l < 30; ++l) lm.envoy("model.layers." + std::to_string(l)).output().save_each();
          if (v == kSteering) {
            auto layer = lm.envoy("model.layers.15");
            layer.output() = layer.output() + steer;
          }
        });
      }));
    }
    for (auto& h : hs) h.result.get();
    for (auto& f : fs) f.get();
    return since(t0);
  };
  // The variants run in turn, round after round; each round's ratio to its
  // own untraced run is kept, and the median over rounds reported, so that
  // drifts of the machine (it is shared, and even idle it varies by several
  // percent from run to run) hit both sides of every ratio alike.
  std::vector<std::vector<double>> times(4), ratios(4);
  for (int64_t r = 0; r < reps; ++r) {
    double untraced = 0;
    for (int v = 0; v < 4; ++v) {
      if (v != 0 && !(variant_mask & (1 << v))) continue;
      const double t = run(static_cast<Variant>(v), tokens);
      if (v == 0) untraced = t;
      times[static_cast<size_t>(v)].push_back(t);
      ratios[static_cast<size_t>(v)].push_back(t / untraced);
    }
  }
  std::printf(
      "| %lld requests x %lld tokens, %lld rounds | median run s | tokens/s | time ratio to untraced, per round | "
      "median ratio |\n",
      static_cast<long long>(requests), static_cast<long long>(tokens), static_cast<long long>(reps));
  std::printf("|---|---|---|---|---|\n");
  for (int v = 0; v < 4; ++v) {
    const size_t i = static_cast<size_t>(v);
    if (times[i].empty()) continue;
    std::string per_round;
    for (double x : ratios[i]) per_round += (per_round.empty() ? "" : ", ") + std::to_string(x).substr(0, 5);
    const double t = median(times[i]);
    std::printf("| %s | %.2f | %.1f | %s | %.3f |\n", names[v], t, requests * tokens / t, per_round.c_str(),
                median(ratios[i]));
  }
  return 0;
}
