// engine_bench: end-to-end prefill and decode throughput of the engine on the
// default model, each beside the machine's floors measured in the same run:
//   memory floor  = bytes of weights a decode step reads / copy bandwidth
//   compute floor = the step's matmul FLOPs / the rate LibTorch's BLAS
//                   reaches on those very shapes at that batch size
// and, for bf16, the logit difference to fp32.
//
//   engine_bench [--model PATH] [--dtypes float32,bfloat16] [--batches 1,8,32]
//                [--prompt-len 64] [--steps 24] [--threads N]
//                [--weights packed,dequantized] [--prefill-len 128] [--skip-floors 1]
//                [--print-steps 1] [--alternate N]
//
// --weights: GGUF weights kept packed (the default) and/or dequantized at
// load (EngineArgs::dequantize), and/or "int8": packed with
// EngineArgs::fast_untraced (the untraced requests measured here run with
// 8-bit activations). Besides the tables it prints one
// machine-readable line per number, "RESULT <dtype>/<weights> <key> <value>"
// (keys prefill_tps, decode_tps_b<B> from the median step, decode_mean_tps_b<B>
// from the steps' total time, weight_mb), which
// bench/llama_cpp_side_by_side.sh reads.
//
// --alternate N: every engine built first, then measured in turn N times
// (prefill and each batch of every engine, then again), the tables giving
// medians; and, per dtype, "RESULT <dtype>/packed_over_dequantized <key>
// <ratio>", the median over the alternations of packed's speed over
// dequantized's (keys prefill, decode_b<B>): seconds apart instead of a
// whole engine's run, so the machine's drift mostly cancels.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "batching/flattener.h"
#include "core/weight_source.h"
#include "models/causal_lm.h"
#include "runner/engine/engine.h"
#include "runner/executor/inproc_executor.h"
#include "tp/parallel_embedding.h"
#include "tp/parallel_linear.h"
#include "support/bench_support.h"

using namespace nnsight;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

struct Shape {
  int64_t in, out, count;  // count: how many such matmuls per step
};

// The matmuls of one decode step of a Llama model.
std::vector<Shape> step_shapes(const ModelConfig& c) {
  const int64_t h = c.hidden_size, kv = c.num_kv_heads * c.head_dim, q = c.num_heads * c.head_dim;
  const int64_t L = c.num_layers;
  return {{h, q, L},           {h, kv, 2 * L}, {q, h, L}, {h, c.intermediate_size, 2 * L}, {c.intermediate_size, h, L},
          {h, c.vocab_size, 1}};
}

// Time LibTorch's at::linear needs for the step's matmuls at `rows` rows,
// with each weight hot in cache (so it is the compute floor, not memory).
double blas_step_seconds(const ModelConfig& c, int64_t rows, at::ScalarType dt) {
  double total = 0;
  for (const auto& s : step_shapes(c)) {
    const double rate = bench::measure_linear_flops(rows, s.in, s.out, dt == at::kBFloat16);
    total += 2.0 * rows * s.in * s.out * s.count / rate;
  }
  return total;
}

const kernels::PackedMatrix* packed_of(Module* m) {
  if (auto* l = dynamic_cast<tp::ColumnParallelLinear*>(m)) return l->packed_weight();
  if (auto* l = dynamic_cast<tp::RowParallelLinear*>(m)) return l->packed_weight();
  if (auto* l = dynamic_cast<tp::VocabParallelEmbedding*>(m)) return l->packed_weight();
  if (auto* l = dynamic_cast<tp::ParallelLMHead*>(m)) return l->packed_weight();
  return nullptr;
}

int64_t weight_bytes(CausalLM& model) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  for (auto& p : model.parameters()) {
    if (!seen.insert(p.data_ptr()).second) continue;
    bool placeholder = p.numel() > 1;  // a packed layer's NaN placeholder holds one element
    for (int64_t s : p.strides()) placeholder = placeholder && s == 0;
    if (!placeholder) bytes += p.numel() * p.element_size();
  }
  // Packed matrices: each once (a tied LM head shares the embedding's).
  std::set<const kernels::PackedMatrix*> packed;
  for (auto& [path, m] : model.named_hookable_modules())
    if (const kernels::PackedMatrix* pm = packed_of(m)) packed.insert(pm);
  for (const kernels::PackedMatrix* pm : packed) bytes += pm->bytes();
  // The embedding table is read one row per token; with tied weights it is
  // read in full as the LM head, which the sum above already counts once.
  return bytes;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One engine of the comparison and what was measured on it (seconds), per alternation.
struct Run {
  std::string dtype, wmode;
  std::unique_ptr<runner::Engine> engine;
  ModelConfig cfg;
  int64_t wbytes = 0;
  std::vector<double> prefill;                   // best of 3 prefills
  std::vector<std::vector<double>> median_step;  // [batch][alternation]
  std::vector<std::vector<double>> total;        // [batch][alternation]: the timed steps together
  std::string tag() const { return dtype + "/" + wmode; }
};

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int64_t len, int64_t vocab) {
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = tok(rng);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = bench::default_model_path();
  std::vector<std::string> dtypes = {"float32", "bfloat16"};
  std::vector<int64_t> batches = {1, 8, 32};
  std::vector<std::string> weights = {"packed", "dequantized"};
  int64_t prompt_len = 64, steps = 24, threads = 0, prefill_len = 128, skip_floors = 0, print_steps = 0;
  int alternate = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      model_path = v;
    else if (a == "--dtypes")
      dtypes = split(v);
    else if (a == "--batches")
      batches = bench::parse_int_list(v);
    else if (a == "--prompt-len")
      prompt_len = std::stoll(v);
    else if (a == "--steps")
      steps = std::stoll(v);
    else if (a == "--threads")
      threads = std::stoll(v);
    else if (a == "--weights")
      weights = split(v);
    else if (a == "--prefill-len")
      prefill_len = std::stoll(v);
    else if (a == "--skip-floors")
      skip_floors = std::stoll(v);
    else if (a == "--print-steps")
      print_steps = std::stoll(v);
    else if (a == "--alternate")
      alternate = std::max(1, std::stoi(v));
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  at::set_num_threads(static_cast<int>(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency())));
  c10::InferenceMode guard;
  const double bw = bench::measure_copy_bandwidth();
  std::printf("machine: %d intra-op threads; copy bandwidth %.1f GB/s\n", at::get_num_threads(), bw / 1e9);

  // One engine per dtype and weights mode. With --alternate N > 1 all are
  // built first and measured in turn N times (each measure of every engine,
  // then the next): the machine's speed drifts over minutes, and engines
  // measured one after the other (about 30 s apart) differ by that drift too.
  std::vector<Run> runs;
  for (const auto& dtype : dtypes)
    for (const auto& wmode : weights) runs.push_back(Run{dtype, wmode});
  const auto build = [&](Run& r) {
    EngineArgs args = EngineArgs()
                          .model(model_path)
                          .dtype(r.dtype)
                          .dequantize(r.wmode == "dequantized")
                          .fast_untraced(r.wmode == "int8")
                          .max_num_seqs(64)
                          .max_num_batched_tokens(4096)
                          .enable_prefix_caching(false)
                          .kv_cache_memory_mb(1024)
                          .show_progress(false)
                          .num_threads(threads);
    r.engine = std::make_unique<runner::Engine>(args);
    auto& exec = dynamic_cast<runner::InProcExecutor&>(r.engine->executor());
    CausalLM& model = exec.runner().model();
    r.cfg = model.config();
    r.wbytes = weight_bytes(model);
  };
  const auto measure = [&](Run& r, int rep) {
    runner::Engine& engine = *r.engine;
    std::mt19937_64 rng(1 + static_cast<uint64_t>(rep));
    // Prefill at batch 1: one prefill_len-token prompt, its first step (best of 3).
    double prefill_best = 1e30;
    for (int i = 0; i < 3; ++i) {
      runner::RequestInput in;
      in.prompt_token_ids = random_prompt(rng, prefill_len, r.cfg.vocab_size);
      in.params = SamplingParams().temperature(0).max_tokens(1).ignore_eos(true);
      engine.add_request(in);
      const auto t0 = clock_type::now();
      engine.step();
      prefill_best = std::min(prefill_best, seconds_since(t0));
      while (engine.has_unfinished()) engine.step();
    }
    r.prefill.push_back(prefill_best);
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const int64_t b = batches[bi];
      std::vector<runner::RequestInput> reqs;
      for (int64_t i = 0; i < b; ++i) {
        runner::RequestInput in;
        in.prompt_token_ids = random_prompt(rng, prompt_len, r.cfg.vocab_size);
        in.params = SamplingParams().temperature(0).max_tokens(steps + 4).ignore_eos(true);
        reqs.push_back(in);
      }
      engine.add_requests(reqs);
      // Prefill everything (and one warm-up decode), then time pure decode steps.
      for (int i = 0; i < 2; ++i) engine.step();
      std::vector<double> times;
      for (int64_t s = 0; s < steps; ++s) {
        const auto t0 = clock_type::now();
        auto outs = engine.step();
        times.push_back(seconds_since(t0));
        if (static_cast<int64_t>(outs.size()) != b) {
          std::fprintf(stderr, "step %lld carried %zu requests, expected %lld\n", static_cast<long long>(s),
                       outs.size(), static_cast<long long>(b));
        }
      }
      while (engine.has_unfinished()) engine.step();
      if (print_steps != 0) {  // each step's ms, in order: the machine's speed drifts within a run
        std::printf("%s batch %lld steps ms:", r.tag().c_str(), static_cast<long long>(b));
        for (double t : times) std::printf(" %.2f", t * 1e3);
        std::printf("\n");
      }
      double total = 0.0;
      for (double t : times) total += t;
      std::sort(times.begin(), times.end());
      r.median_step[bi].push_back(times[times.size() / 2]);
      r.total[bi].push_back(total);
    }
  };
  const auto report = [&](Run& r) {
    const std::string tag = r.tag();
    const at::ScalarType dt = r.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;
    const double mem_floor = static_cast<double>(r.wbytes) / bw;
    const double prefill = median(r.prefill);
    const double prefill_floor =
        skip_floors != 0 ? mem_floor : std::max(mem_floor, blas_step_seconds(r.cfg, prefill_len, dt));
    std::printf("\n## %s: weights %.1f MB, memory floor %.1f ms/step%s\n", tag.c_str(), r.wbytes / 1e6, mem_floor * 1e3,
                alternate > 1 ? " (medians of the alternations)" : "");
    std::printf("prefill %lld tokens at batch 1: %.1f ms = %.0f tokens/s (compute floor %.1f ms, ratio %.2f)\n",
                static_cast<long long>(prefill_len), prefill * 1e3, prefill_len / prefill, prefill_floor * 1e3,
                prefill / prefill_floor);
    std::printf("RESULT %s weight_mb %.2f\nRESULT %s prefill_tps %.2f\n", tag.c_str(), r.wbytes / 1e6, tag.c_str(),
                prefill_len / prefill);
    std::printf("| batch | step ms (median) | tokens/s | memory floor ms | compute floor ms | ratio to larger |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const int64_t b = batches[bi];
      const double med = median(r.median_step[bi]);
      const double compute_floor = skip_floors != 0 ? 0.0 : blas_step_seconds(r.cfg, b, dt);
      const double floor = std::max(mem_floor, compute_floor);
      std::printf("| %lld | %.1f | %.1f | %.1f | %.1f | %.2f |\n", static_cast<long long>(b), med * 1e3, b / med,
                  mem_floor * 1e3, compute_floor * 1e3, med / floor);
      std::printf("RESULT %s decode_tps_b%lld %.2f\n", tag.c_str(), static_cast<long long>(b), b / med);
      // Tokens over the steps' total time, as llama-bench and llama-batched-bench
      // count (a slow step weighs in fully here, not in the median).
      std::printf("RESULT %s decode_mean_tps_b%lld %.2f\n", tag.c_str(), static_cast<long long>(b),
                  static_cast<double>(b * steps) / median(r.total[bi]));
    }
    std::fflush(stdout);
  };
  for (Run& r : runs) {
    r.median_step.resize(batches.size());
    r.total.resize(batches.size());
  }
  if (alternate <= 1) {
    for (Run& r : runs) {  // one engine at a time: the memory of one
      build(r);
      measure(r, 0);
      report(r);
      r.engine.reset();
    }
  } else {
    for (Run& r : runs) build(r);
    // Each alternation starts with the next engine (rotating the order), so
    // that none is always measured first, just after another's run.
    for (int rep = 0; rep < alternate; ++rep)
      for (size_t i = 0; i < runs.size(); ++i) measure(runs[(i + static_cast<size_t>(rep)) % runs.size()], rep);
    for (Run& r : runs) report(r);
    // Packed over dequantized and int8 over packed, per alternation (seconds
    // apart), then their median.
    for (const auto& dtype : dtypes) {
      const auto find = [&](const char* wmode) -> const Run* {
        for (const Run& r : runs)
          if (r.dtype == dtype && r.wmode == wmode) return &r;
        return nullptr;
      };
      const auto ratios = [&](const Run* fast, const Run* slow, const char* name) {
        if (fast == nullptr || slow == nullptr) return;
        const auto ratio_line = [&](const char* key, const std::vector<double>& ft, const std::vector<double>& st) {
          std::vector<double> q;
          for (size_t i = 0; i < ft.size() && i < st.size(); ++i) q.push_back(st[i] / ft[i]);  // speed ratio
          std::printf("RESULT %s/%s %s %.3f (alternations %.3f-%.3f)\n", dtype.c_str(), name, key, median(q),
                      *std::min_element(q.begin(), q.end()), *std::max_element(q.begin(), q.end()));
        };
        std::printf("\n");
        ratio_line("prefill", fast->prefill, slow->prefill);
        for (size_t bi = 0; bi < batches.size(); ++bi)
          ratio_line(("decode_b" + std::to_string(batches[bi])).c_str(), fast->total[bi], slow->total[bi]);
      };
      ratios(find("packed"), find("dequantized"), "packed_over_dequantized");
      ratios(find("int8"), find("packed"), "int8_over_packed");
    }
  }

  // bf16 versus fp32 logits on the same prompt (every position).
  if (std::find(dtypes.begin(), dtypes.end(), "bfloat16") != dtypes.end()) {
    auto source = open_weights(model_path);
    auto m32 = load_causal_lm(*source, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
    auto m16 = load_causal_lm(*source, tp::ParallelContext{}, at::TensorOptions().dtype(at::kBFloat16));
    std::mt19937_64 rng(7);
    const int64_t n = 48;
    std::vector<int32_t> p32 = random_prompt(rng, n, m32->config().vocab_size);
    std::vector<int64_t> ids(p32.begin(), p32.end());
    std::vector<int32_t> blocks = {0, 1, 2, 3};
    batching::SeqSlot slot;
    slot.token_ids = p32;
    slot.block_table = blocks;
    slot.sample = true;
    auto meta = batching::flatten_slots({slot}, 16).meta;
    meta.logits_rows = at::arange(n, at::kLong);
    auto run = [&](CausalLM& m) {
      auto kv = allocate_kv_caches(m.num_layers(), 4, 16, m.local_kv_heads(), m.head_dim(), m.options());
      return m.compute_logits(m.forward(at::tensor(ids, at::kLong), meta, kv), meta.logits_rows);
    };
    at::Tensor a = run(*m32), b = run(*m16);
    const double max_diff = (a - b).abs().max().item<double>();
    const double mean_diff = (a - b).abs().mean().item<double>();
    const double agree = (a.argmax(1) == b.argmax(1)).to(at::kFloat).mean().item<double>();
    std::printf(
        "\nbf16 vs fp32 logits over %lld positions: max |diff| %.3f, mean |diff| %.4f, argmax agreement %.1f%%\n",
        static_cast<long long>(n), max_diff, mean_diff, 100 * agree);
  }
  return 0;
}
