// capture_bench: what single-pass activation capture costs the engine.
//
// Decode throughput at N concurrent requests (default 32) on the default
// model, with capture off, capturing one decoder layer, and capturing all of
// them (the last token of every request at every step), plus a second
// engine without capture whose ratio to "off" shows the noise floor. The
// settings run side by side in one process: engines over one model object,
// each given the same requests, prefilled, then stepped in turn one decode
// step at a time (the order rotating every step), so load from other
// processes on a shared machine falls on all alike. Each round of decode
// steps gives one ratio to "off"; the report lists them, their median, and
// the load average before and after. It also times the capture work of one
// all-layers step on its own.
//
//   capture_bench [--model PATH] [--requests 32] [--prompt-len 32]
//                 [--rounds 5] [--steps-per-round 8] [--one-layer 15] [--threads N]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>
#include <random>
#include <string>
#include <vector>

#include "core/model_path.h"
#include "core/weight_source.h"
#include "front/capture/ring_writer.h"
#include "models/causal_lm.h"
#include "runner/engine/engine.h"
#include "runner/executor/inproc_executor.h"
#include "runner/model_runner/runner_extension.h"
#include "runner/executor/worker_setup.h"
#include "support/bench_support.h"

using namespace nnsight;

namespace {

struct Options {
  std::string model;
  int requests = 32;
  int prompt_len = 32;
  int rounds = 5;
  int steps_per_round = 8;
  int one_layer = 15;
  int threads = 0;
};

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::unique_ptr<runner::Engine> make_engine(const EngineArgs& args, std::shared_ptr<CausalLM> model) {
  runner::RunnerConfig rc = runner::runner_config_for(args, *model);
  auto mr = std::make_unique<runner::ModelRunner>(model, rc);
  runner::RunnerExtensionContext ext{*mr, args, 0, 1};
  runner::apply_runner_extensions(ext);
  return std::make_unique<runner::Engine>(args, std::make_unique<runner::InProcExecutor>(std::move(mr)), nullptr);
}

// Adds the requests and steps until every one has two output tokens (its
// prefill and one warm decode step are done).
void prefill(runner::Engine& engine, const Options& o, int64_t vocab) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(vocab - 1));
  const int decode_steps = o.rounds * o.steps_per_round;
  for (int i = 0; i < o.requests; ++i) {
    runner::RequestInput in;
    for (int j = 0; j < o.prompt_len; ++j) in.prompt_token_ids.push_back(tok(rng));
    in.params = SamplingParams().temperature(0).max_tokens(decode_steps + 4).ignore_eos(true);
    engine.add_request(in);
  }
  std::map<uint64_t, size_t> tokens;
  auto decoding = [&] {
    if (tokens.size() < static_cast<size_t>(o.requests)) return false;
    for (auto& [id, n] : tokens)
      if (n < 2) return false;
    return true;
  };
  while (!decoding())
    for (auto& out : engine.step()) tokens[out.request_id] = out.token_ids.size();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.model = bench::default_model_path();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      o.model = v;
    else if (a == "--requests")
      o.requests = std::atoi(v.c_str());
    else if (a == "--prompt-len")
      o.prompt_len = std::atoi(v.c_str());
    else if (a == "--rounds")
      o.rounds = std::atoi(v.c_str());
    else if (a == "--steps-per-round")
      o.steps_per_round = std::atoi(v.c_str());
    else if (a == "--one-layer")
      o.one_layer = std::atoi(v.c_str());
    else if (a == "--threads")
      o.threads = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "capture_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  // LibTorch's default unless asked: on a shared 2-core machine more threads
  // than free cores make every step wait on spinning peers.
  if (o.threads > 0) at::set_num_threads(o.threads);
  c10::InferenceMode guard;
  const std::string load_before = load_average();
  const std::string path = resolve_model_path(o.model);

  const int64_t tokens_needed = int64_t(o.requests) * (o.prompt_len + o.rounds * o.steps_per_round + 8);
  EngineArgs base = EngineArgs()
                        .model(o.model)
                        .show_progress(false)
                        .max_num_seqs(o.requests)
                        .max_num_batched_tokens(std::max(2048, o.requests * o.prompt_len))
                        .num_kv_blocks(tokens_needed / 16 + o.requests + 8);
  const std::string pid = std::to_string(::getpid());
  struct Setting {
    std::string name;
    EngineArgs args;
    std::shared_ptr<CausalLM> model;
    std::unique_ptr<runner::Engine> engine;
    std::vector<double> round_seconds;
    int64_t tokens = 0;
  };
  std::vector<Setting> settings;
  settings.push_back({"off", EngineArgs(base).capture_enabled(false), nullptr, nullptr, {}, 0});
  // A second engine without capture: its ratio to "off" is the noise floor.
  settings.push_back({"off (control)", EngineArgs(base).capture_enabled(false), nullptr, nullptr, {}, 0});
  settings.push_back({"1 layer",
                      EngineArgs(base)
                          .capture_enabled(true)
                          .capture_layers(std::to_string(o.one_layer))
                          .engine_id("bench-" + pid + "-one"),
                      nullptr,
                      nullptr,
                      {},
                      0});
  settings.push_back({"all layers",
                      EngineArgs(base).capture_enabled(true).engine_id("bench-" + pid + "-all"),
                      nullptr,
                      nullptr,
                      {},
                      0});
  // One model object for all engines, so every setting runs on the same
  // weights in the same memory (separate copies differed by several percent
  // from placement alone). Each capture engine's hooks fire in the other
  // engines' forwards too, where they return at once (no rows selected):
  // "off" pays that idle dispatch, a few microseconds per step.
  auto model = load_causal_lm(*open_weights(path), tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  const int layers = static_cast<int>(model->num_layers());
  for (auto& s : settings) {
    s.model = model;
    s.engine = make_engine(s.args, s.model);
    prefill(*s.engine, o, s.model->config().vocab_size);
  }
  settings.back().name = "all " + std::to_string(layers) + " layers";

  using clock = std::chrono::steady_clock;
  for (int r = 0; r < o.rounds; ++r) {
    for (auto& s : settings) s.round_seconds.push_back(0);
    for (int step = 0; step < o.steps_per_round; ++step) {
      for (size_t j = 0; j < settings.size(); ++j) {
        Setting& s = settings[(j + static_cast<size_t>(step + r)) % settings.size()];
        const auto t0 = clock::now();
        const size_t produced = s.engine->step().size();
        s.round_seconds.back() += std::chrono::duration<double>(clock::now() - t0).count();
        s.tokens += static_cast<int64_t>(produced);
      }
    }
  }
  std::printf("capture_bench: %s, %d concurrent requests, prompt %d, %d rounds of %d decode steps, %d threads\n",
              settings[0].model->config().name.c_str(), o.requests, o.prompt_len, o.rounds, o.steps_per_round,
              at::get_num_threads());
  std::printf("load average before: %s, after: %s\n\n", load_before.c_str(), load_average().c_str());
  // The capture work of one all-layers step, alone: one index_select per
  // layer and the ring appends of every record.
  {
    const int64_t hidden = settings[0].model->config().hidden_size;
    at::Tensor y = at::randn({o.requests, hidden});  // a layer's output at decode: [T, hidden]
    at::Tensor rows = at::arange(o.requests, at::kLong);
    at::Tensor staging = at::empty({layers, o.requests, hidden});
    capture::RingWriter ring(capture::RingOptions()
                                 .with_engine_id("bench-" + pid + "-micro")
                                 .with_buffer_bytes(256ull << 20)
                                 .with_hidden_size(hidden));
    double best_select = 1e30, best_write = 1e30;
    for (int rep = 0; rep < 20; ++rep) {
      auto t0 = clock::now();
      for (int l = 0; l < layers; ++l) {
        at::Tensor out = staging[l];
        at::index_select_out(out, y, 0, rows);
      }
      auto t1 = clock::now();
      for (int l = 0; l < layers; ++l) {
        const float* base_ptr = staging[l].data_ptr<float>();
        for (int i = 0; i < o.requests; ++i) {
          capture::RecordMeta m;
          m.request_id = static_cast<uint64_t>(i + 1);
          m.layer = l;
          m.shape0 = hidden;
          ring.append(m, base_ptr + i * hidden, static_cast<uint64_t>(hidden) * 4);
        }
      }
      ring.publish();
      auto t2 = clock::now();
      best_select = std::min(best_select, std::chrono::duration<double>(t1 - t0).count());
      best_write = std::min(best_write, std::chrono::duration<double>(t2 - t1).count());
    }
    double off_step = 0;
    for (double t : settings[0].round_seconds) off_step += t;
    off_step /= o.rounds * o.steps_per_round;
    std::printf(
        "capture work of one step at %d requests x %d layers, alone (best of 20): index_select %.3f ms, "
        "ring writes %.3f ms; a decode step without capture took %.1f ms on average\n\n",
        o.requests, layers, best_select * 1e3, best_write * 1e3, off_step * 1e3);
  }
  std::printf("| capture | decode tok/s (all rounds) | ratio to off, per round | median ratio |\n|---|---|---|---|\n");
  for (auto& s : settings) {
    double total = 0;
    for (double t : s.round_seconds) total += t;
    std::vector<double> ratios;
    std::string per;
    for (int r = 0; r < o.rounds; ++r) {
      // Same tokens per round in every setting: throughput ratio = inverse time ratio.
      ratios.push_back(settings[0].round_seconds[static_cast<size_t>(r)] / s.round_seconds[static_cast<size_t>(r)]);
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%s%.3f", r ? ", " : "", ratios.back());
      per += buf;
    }
    std::printf("| %s | %.1f | %s | %.3f |\n", s.name.c_str(), static_cast<double>(s.tokens) / total, per.c_str(),
                median(ratios));
  }
  return 0;
}
