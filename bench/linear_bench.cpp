// kernels::linear against at::linear on the default model's shapes
// (SmolLM2-135M), with the machine's floors measured in the same process.
//
// Each iteration multiplies by the next of many copies of the weight (at
// least 30, as in the model's 30 layers, and at least 192 MiB in all), so the
// weights come from memory as in a real decode step, never from the caches.
//
// Counters: bytes_per_second (weight bytes read), FLOPS, copy_Bps (memcpy
// bandwidth, 2 * bytes / time, measured before the runs). At the end a
// markdown table pairs each of our runs with at::linear's, taking the best
// (smallest) time over --benchmark_repetitions.
//
//   ./build/bench/linear_bench --benchmark_repetitions=3 [--benchmark_filter=...]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/kernels/linear.h"
#include "support/bench_support.h"

namespace {

struct Shape {
  const char* name;
  int64_t k, n;
};

// The default model's linear layers: hidden 576, KV 3 x 64, FFN 1536, vocab 49152 (tied head).
const Shape kShapes[] = {{"q_proj/o_proj", 576, 576},
                         {"k_proj/v_proj", 576, 192},
                         {"gate/up_proj", 576, 1536},
                         {"down_proj", 1536, 576},
                         {"lm_head", 576, 49152}};
const int64_t kDecodeRows[] = {1, 2, 4, 8, 16};
const int64_t kMidRows[] = {32, 64};
const int64_t kPrefillRows[] = {128, 512, 2048};

constexpr int64_t kMinWeightBytes = int64_t(192) << 20;
constexpr int64_t kMinCopies = 30;

struct Meta {
  std::string shape;
  int64_t m, k, n;
  std::string dtype;
  bool ours;
};
std::map<std::string, Meta>& registry() {
  static std::map<std::string, Meta> r;
  return r;
}
std::vector<std::string>& registration_order() {
  static std::vector<std::string> r;
  return r;
}
double g_copy_bps = 0;

// The copies of one (shape, dtype) weight; kept while consecutive benchmarks use it.
struct Weights {
  int64_t k = 0, n = 0;
  at::ScalarType dtype = at::kFloat;
  std::vector<at::Tensor> w;
  at::Tensor bias;
};
const Weights& weights_for(int64_t k, int64_t n, at::ScalarType dt) {
  static std::unique_ptr<Weights> cur;
  if (!cur || cur->k != k || cur->n != n || cur->dtype != dt) {
    cur.reset();
    auto w = std::make_unique<Weights>();
    w->k = k;
    w->n = n;
    w->dtype = dt;
    const int64_t bytes = k * n * static_cast<int64_t>(c10::elementSize(dt));
    const int64_t copies = std::max(kMinCopies, (kMinWeightBytes + bytes - 1) / bytes);
    for (int64_t i = 0; i < copies; ++i) w->w.push_back((at::randn({n, k}) * 0.05).to(dt));
    cur = std::move(w);
  }
  return *cur;
}

void run_linear(benchmark::State& state, int64_t m, int64_t k, int64_t n, at::ScalarType dt, bool ours) {
  const Weights& ws = weights_for(k, n, dt);
  at::Tensor x = at::randn({m, k}).to(dt);
  size_t i = 0;
  for (auto _ : state) {
    const at::Tensor& w = ws.w[i];
    i = (i + 1) % ws.w.size();
    at::Tensor y = ours ? nnsight::kernels::linear(x, w, at::Tensor()) : at::linear(x, w);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  const double weight_bytes = static_cast<double>(k * n) * static_cast<double>(c10::elementSize(dt));
  state.SetBytesProcessed(static_cast<int64_t>(weight_bytes) * state.iterations());
  state.counters["FLOPS"] = benchmark::Counter(
      2.0 * static_cast<double>(m * k * n) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["copy_Bps"] = g_copy_bps;
}

void register_all() {
  for (const Shape& s : kShapes) {
    std::vector<int64_t> rows(std::begin(kDecodeRows), std::end(kDecodeRows));
    rows.insert(rows.end(), std::begin(kMidRows), std::end(kMidRows));
    // The head only ever sees one row per sequence: no prefill sizes.
    if (std::string(s.name) != "lm_head") rows.insert(rows.end(), std::begin(kPrefillRows), std::end(kPrefillRows));
    for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
      const std::string dts = dt == at::kFloat ? "f32" : "bf16";
      for (int64_t m : rows) {
        for (bool ours : {true, false}) {
          const std::string name =
              std::string("linear/") + s.name + "/" + dts + "/M=" + std::to_string(m) + (ours ? "/ours" : "/at_linear");
          registry()[name] = Meta{s.name, m, s.k, s.n, dts, ours};
          registration_order().push_back(name);
          const int64_t k = s.k, n = s.n;
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_linear(st, m, k, n, dt, ours); })
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime()
              ->MinTime(0.2);
        }
      }
    }
  }
}

// Console output as usual, plus the markdown table at the end.
// Whether a run failed: Google Benchmark 1.7 (Debian 12) says error_occurred,
// 1.8 and later say skipped.
template <class R>
auto failed(const R& r, int) -> decltype(bool(r.error_occurred)) {
  return r.error_occurred;
}
template <class R>
bool failed(const R& r, long) {
  return static_cast<int>(r.skipped) != 0;
}

class TableReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || failed(r, 0)) continue;
      const std::string& fn = r.run_name.function_name;
      if (!registry().count(fn)) continue;
      const double us = r.GetAdjustedRealTime();
      auto it = best_us_.find(fn);
      if (it == best_us_.end() || us < it->second) best_us_[fn] = us;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    g_copy_bps = std::max(g_copy_bps, nnsight::bench::measure_copy_bandwidth());
    std::printf("\ncopy bandwidth (memcpy, 2*bytes/time, best of the runs before and after): %.1f GB/s\n",
                g_copy_bps / 1e9);
    std::printf("threads: %d\n\n", at::get_num_threads());
    std::printf(
        "| shape [K->N] | M | dtype | ours (us) | at::linear (us) | ours GB/s | at::linear GB/s | ours GFLOP/s | "
        "at::linear GFLOP/s | floor | ratio |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& name : registration_order()) {
      const Meta& meta = registry().at(name);
      if (!meta.ours) continue;
      const std::string other = name.substr(0, name.size() - 4) + "at_linear";
      auto a = best_us_.find(name), b = best_us_.find(other);
      if (a == best_us_.end() || b == best_us_.end()) continue;
      const double bytes = static_cast<double>(meta.k * meta.n) * (meta.dtype == "f32" ? 4.0 : 2.0);
      const double flops = 2.0 * static_cast<double>(meta.m * meta.k * meta.n);
      const double gbs = bytes / a->second / 1e3, gbs_at = bytes / b->second / 1e3, gf = flops / a->second / 1e3,
                   gf_at = flops / b->second / 1e3;
      char floor[64], ratio[64];
      if (meta.m <= 16) {  // memory-bound: against the copy bandwidth
        std::snprintf(floor, sizeof floor, "copy %.1f GB/s", g_copy_bps / 1e9);
        std::snprintf(ratio, sizeof ratio, "%.0f%% of copy", 100.0 * gbs * 1e9 / g_copy_bps);
      } else {  // compute-bound: against at::linear
        std::snprintf(floor, sizeof floor, "at::linear");
        std::snprintf(ratio, sizeof ratio, "time %.2fx", a->second / b->second);
      }
      std::printf("| %s [%lld->%lld] | %lld | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |\n",
                  meta.shape.c_str(), static_cast<long long>(meta.k), static_cast<long long>(meta.n),
                  static_cast<long long>(meta.m), meta.dtype.c_str(), a->second, b->second, gbs, gbs_at, gf, gf_at,
                  floor, ratio);
    }
  }

 private:
  std::map<std::string, double> best_us_;
};

}  // namespace

int main(int argc, char** argv) {
  // LibTorch's default intra-op thread count can be lower than the core count
  // (it is 1 on the 2-core reference VM); the kernels are measured on all cores.
  const char* env = std::getenv("NNSIGHT_BENCH_THREADS");
  at::set_num_threads(env ? std::atoi(env) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  g_copy_bps = nnsight::bench::measure_copy_bandwidth();
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  TableReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
