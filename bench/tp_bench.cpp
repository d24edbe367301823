// tp_bench: decode throughput of the engine with tensor parallelism, beside
// one process and one worker process (which isolates the cost of the step
// broadcast from the cost of the collectives), and the latency of the
// collectives a decode step makes (two all-reduces per layer).
//
//   tp_bench [--model PATH] [--tp 3] [--batches 1,8] [--prompt-len 32]
//            [--steps 16] [--device cpu|cuda] [--dtype float32]
//
// On the CPU, the in-process engine gets every core; the workers divide
// them (EngineArgs.num_threads 0), so on a 2-core machine 3 ranks share 2
// cores and TP cannot be faster: the numbers show what it costs. On GPUs
// (scripts/gpu-check) each rank has its own device and NCCL.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runner/engine/engine.h"
#include "support/bench_support.h"
#include "tp/make_process_group.h"

using namespace nnsight;
using clock_type = std::chrono::steady_clock;

namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

struct Options {
  std::string model = bench::default_model_path();
  int64_t tp = 3;
  std::vector<int64_t> batches{1, 8};
  int64_t prompt_len = 32;
  int64_t steps = 16;
  std::string device = "cpu";
  std::string dtype = "float32";
};

// Decode tokens/s of `batch` requests after their prefill.
double decode_throughput(const EngineArgs& args, const Options& o, int64_t batch) {
  runner::Engine engine(args);
  std::mt19937 rng(42);
  std::vector<runner::RequestInput> reqs;
  for (int64_t b = 0; b < batch; ++b) {
    runner::RequestInput in;
    for (int64_t i = 0; i < o.prompt_len; ++i) in.prompt_token_ids.push_back(static_cast<int32_t>(100 + rng() % 40000));
    in.params = SamplingParams().temperature(0).max_tokens(o.steps + 2).ignore_eos(true);
    reqs.push_back(std::move(in));
  }
  engine.add_requests(std::move(reqs));
  // Prefill (and one warm-up decode step).
  for (int i = 0; i < 2; ++i) engine.step();
  const auto t0 = clock_type::now();
  for (int64_t s = 0; s < o.steps; ++s) engine.step();
  const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
  return static_cast<double>(batch * o.steps) / dt;
}

// Median time of an all-reduce of [rows, hidden] floats over `world` gloo ranks (threads).
double allreduce_us(int world, int64_t rows, int64_t hidden) {
  char dir[] = "/tmp/nnsight-tpbench-XXXXXX";
  if (!::mkdtemp(dir)) return -1;
  const std::string where = std::string("file://") + dir + "/store";
  std::vector<double> times;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      c10::InferenceMode guard;
      auto g =
          tp::make_process_group(tp::ProcessGroupOptions().with_rank(r).with_world_size(world).with_rendezvous(where));
      at::Tensor t = at::ones({rows, hidden});
      for (int i = 0; i < 20; ++i) g->all_reduce_sum(t);  // warm-up
      std::vector<double> mine;
      for (int i = 0; i < 200; ++i) {
        g->barrier();
        const auto t0 = clock_type::now();
        g->all_reduce_sum(t);
        mine.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
      }
      if (r == 0) times = mine;
      g->barrier();
    });
  }
  for (auto& t : threads) t.join();
  std::string store = std::string(dir) + "/store";
  ::unlink(store.c_str());
  ::rmdir(dir);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      o.model = v;
    else if (a == "--tp")
      o.tp = std::stoll(v);
    else if (a == "--batches")
      o.batches = parse_list(v);
    else if (a == "--prompt-len")
      o.prompt_len = std::stoll(v);
    else if (a == "--steps")
      o.steps = std::stoll(v);
    else if (a == "--device")
      o.device = v;
    else if (a == "--dtype")
      o.dtype = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  double load[3] = {0, 0, 0};
  ::getloadavg(load, 3);
  std::printf("tp_bench: %s, %s on %s, %u cores, load average %.2f\n", o.model.c_str(), o.dtype.c_str(),
              o.device.c_str(), std::thread::hardware_concurrency(), load[0]);
  const EngineArgs base = EngineArgs()
                              .model(o.model)
                              .show_progress(false)
                              .kv_cache_memory_mb(256)
                              .device(o.device)
                              .dtype(o.dtype)
                              .max_num_seqs(64);
  struct Row {
    std::string name;
    EngineArgs args;
  };
  std::vector<Row> rows = {{"TP=1, in process", EngineArgs(base).executor("inproc")},
                           {"TP=1, 1 worker process", EngineArgs(base).executor("mp")},
                           {"TP=" + std::to_string(o.tp) + ", " + std::to_string(o.tp) + " worker processes",
                            EngineArgs(base).tensor_parallel_size(o.tp)}};
  if (o.tp == 1) rows.pop_back();  // one GPU: nothing to split
  std::printf("\n| engine |");
  for (auto b : o.batches) std::printf(" decode tok/s, batch %lld |", static_cast<long long>(b));
  std::printf("\n|---|");
  for (size_t i = 0; i < o.batches.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const auto& row : rows) {
    std::printf("| %s |", row.name.c_str());
    std::fflush(stdout);
    for (auto b : o.batches) {
      std::printf(" %.1f |", decode_throughput(row.args, o, b));
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  if (o.device == "cpu") {
    std::printf("\ngloo all-reduce over %lld ranks (threads of one process), median of 200:\n",
                static_cast<long long>(o.tp));
    for (int64_t r : {int64_t(1), int64_t(8)})
      std::printf("  [%lld, 576] float32: %.1f us\n", static_cast<long long>(r),
                  allreduce_us(static_cast<int>(o.tp), r, 576));
  }
  ::getloadavg(load, 3);
  std::printf("load average after: %.2f\n", load[0]);
  return 0;
}
