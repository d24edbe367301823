// gpu_bench: the engine at serving speed on one device, one table
// (scripts/gpu-bench runs it on a lent GPU machine):
//   - the device's copy bandwidth (a large device-to-device copy) and the
//     batch-1 decode roofline it implies (bandwidth / weight bytes);
//   - decode tokens/s at each batch, prefill tokens/s of one long prompt
//     (on CUDA also with the padded attention instead of varlen flash);
//   - on CUDA, decode eager (no CUDA graphs) and on the ATen path (the CUDA
//     kernels off) at the smallest and largest batch, as what each is worth;
//   - trace costs at one batch, as ratios to the untraced decode of the same
//     batch, alternating the variants round after round: saving one layer
//     every step, steering one layer every step, saving every layer (traces
//     that only save replay CUDA graphs with their hooks deferred, a steering
//     trace runs eager: each ratio also against the untraced decode eager).
// The model is Llama-3-8B-shaped with random weights made on the device (no
// download; the text is meaningless, the speed is not), or --shape tiny for
// a smoke run anywhere.
//
//   gpu_bench [--device cuda] [--dtype bfloat16] [--shape 8b|tiny]
//             [--batches 1,8,64,256] [--steps 32] [--prefill 2048]
//             [--trace-batch 8] [--rounds 3] [--kv-cache-mb 24576]
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/kernels/cuda_kernels.h"
#include "core/kernels/fixed_rows_linear.h"
#include "core/kernels/paged_attention_flash.h"
#include "front/trace_client/graph_file.h"
#include "front/trace_client/graph_trace.h"
#include "models/causal_lm.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/decode_graphs.h"
#include "support/bench_support.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

using namespace nnsight;
using clock_type = std::chrono::steady_clock;

namespace {

struct Options {
  std::string device = "cuda", dtype = "bfloat16", shape = "8b";
  std::vector<int64_t> batches = {1, 8, 64, 256};
  int64_t steps = 32, prefill = 2048, trace_batch = 8, rounds = 3, kv_cache_mb = 24576;
};

double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

void sync(const at::Device& d) {
  // A tiny copy to the host waits for the device's queue.
  if (!d.is_cpu()) at::zeros({1}, at::TensorOptions().device(d)).cpu();
}

ModelConfig config_for(const std::string& shape) {
  ModelConfig c = testing::tiny_llama_config(false);
  if (shape == "tiny") {
    c.max_position = 4096;
    return c;
  }
  c.name = "llama-3-8b-shaped";
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position = 8192;
  c.rope_theta = 500000.0;
  return c;
}

// Random weights drawn on the device (an 8B model's 16 GB never cross the
// bus): small enough that bf16 activations stay finite.
void randomize_on_device(CausalLM& model) {
  at::NoGradGuard no_grad;
  for (auto& p : model.named_parameters(/*recurse=*/true)) {
    at::Tensor t = p.value();
    if (p.key().find("norm") != std::string::npos)
      t.fill_(1.0);
    else
      t.normal_(0.0, 0.02);
  }
}

// Device-to-device copy bandwidth in bytes/s (read + write).
double copy_bandwidth(const at::Device& d) {
  const int64_t bytes = d.is_cpu() ? (int64_t{256} << 20) : (int64_t{2} << 30);
  at::Tensor a = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(d)).fill_(1);
  at::Tensor b = at::empty_like(a);
  b.copy_(a);
  sync(d);
  double best = 1e30;
  for (int r = 0; r < 10; ++r) {
    auto t0 = clock_type::now();
    b.copy_(a);
    sync(d);
    best = std::min(best, since(t0));
  }
  return 2.0 * static_cast<double>(bytes) / best;
}

std::vector<int32_t> prompt(int64_t len, int64_t vocab, int64_t salt) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i)
    p[static_cast<size_t>(i)] = static_cast<int32_t>(3 + (salt * 7919 + i * 104729) % (vocab - 3));
  return p;
}

SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

// Seconds of `steps` decode steps of `requests` (their prefill step first, not timed).
double decode_seconds(runner::Engine& engine, std::vector<runner::RequestInput> requests, int64_t steps,
                      const at::Device& d) {
  engine.add_requests(std::move(requests));
  engine.step();  // prefill
  sync(d);
  auto t0 = clock_type::now();
  for (int64_t s = 0; s < steps && engine.has_unfinished(); ++s) engine.step();
  sync(d);
  const double t = since(t0);
  testing::run_to_completion(engine);
  return t;
}

std::vector<runner::RequestInput> plain_requests(int64_t batch, int64_t vocab, int64_t max_tokens) {
  std::vector<runner::RequestInput> out(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) {
    out[static_cast<size_t>(i)].prompt_token_ids = prompt(32, vocab, i);
    out[static_cast<size_t>(i)].params = greedy(max_tokens);
  }
  return out;
}

// A graph run at every generation step: `body` is its nodes after the iter
// node (id 0, the step), closed by the final "end".
std::string every_step(const std::string& body) {
  return "{\"nodes\": [{\"kind\": \"iter\", \"start\": 0, \"stop\": \"all\"}, " + body + ", {\"kind\": \"end\"}]}";
}

std::string save_layer(int64_t layer, int64_t first_id, const std::string& name) {
  std::ostringstream s;
  s << "{\"kind\": \"get\", \"key\": \"model.layers." << layer << ".output\", \"step\": {\"iter\": 0}}, "
    << "{\"kind\": \"save\", \"name\": \"" << name << "\", \"args\": [" << first_id << "], \"mode\": \"append\"}";
  return s.str();
}

std::string steer_layer(int64_t layer, int64_t hidden) {
  std::ostringstream s;
  s << "{\"kind\": \"get\", \"key\": \"model.layers." << layer << ".output\", \"step\": {\"iter\": 0}}, "
    << "{\"kind\": \"const\", \"value\": {\"dtype\": \"float32\", \"shape\": [" << hidden << "], \"data\": [";
  for (int64_t i = 0; i < hidden; ++i) s << (i ? ", " : "") << (i % 2 ? "0.01" : "-0.01");
  s << "]}}, {\"kind\": \"op\", \"op\": \"add\", \"args\": [1, 2]}, "
    << "{\"kind\": \"set\", \"key\": \"model.layers." << layer << ".output\", \"step\": {\"iter\": 0}, \"args\": [3]}";
  return s.str();
}

std::vector<runner::RequestInput> traced_requests(runner::Engine& engine, const std::string& graph, int64_t batch,
                                                  int64_t vocab, int64_t max_tokens) {
  std::vector<runner::RequestInput> prompts(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) prompts[static_cast<size_t>(i)].prompt_token_ids = prompt(32, vocab, i);
  const std::vector<tracing::GraphFile> graphs = {tracing::parse_graph_file("bench.json", graph)};
  return tracing::prepare_graph_trace(engine.model_structure(), std::move(prompts), graphs, greedy(max_tokens),
                                      tracing::next_trace_id())
      .requests;
}

}  // namespace

int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--device")
      o.device = v;
    else if (a == "--dtype")
      o.dtype = v;
    else if (a == "--shape")
      o.shape = v;
    else if (a == "--batches")
      o.batches = bench::parse_int_list(v);
    else if (a == "--steps")
      o.steps = std::stoll(v);
    else if (a == "--prefill")
      o.prefill = std::stoll(v);
    else if (a == "--trace-batch")
      o.trace_batch = std::stoll(v);
    else if (a == "--rounds")
      o.rounds = std::stoll(v);
    else if (a == "--kv-cache-mb")
      o.kv_cache_mb = std::stoll(v);
  }
  c10::InferenceMode inference;
  const at::Device device(o.device);
  const at::ScalarType dtype = o.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;

  const double bandwidth = copy_bandwidth(device);
  const ModelConfig cfg = config_for(o.shape);
  auto t0 = clock_type::now();
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(dtype).device(device));
  randomize_on_device(*model);
  sync(device);
  int64_t weight_bytes = 0;
  for (const auto& p : model->named_parameters(/*recurse=*/true)) weight_bytes += p.value().nbytes();
  std::printf("model: %s, %s on %s, %.2f GB of weights, made in %.1f s\n", cfg.name.c_str(), o.dtype.c_str(),
              o.device.c_str(), static_cast<double>(weight_bytes) / 1e9, since(t0));
  const int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  // An engine on the model, with a KV cache of kv_mb.
  const auto make_engine = [&](int64_t kv_mb) {
    return testing::tiny_engine(EngineArgs()
                                    .device(o.device)
                                    .dtype(o.dtype)
                                    .kv_cache_memory_mb(kv_mb)
                                    .max_num_seqs(std::max<int64_t>(max_batch, o.trace_batch))
                                    .max_num_batched_tokens(std::max<int64_t>(o.prefill, 32 * max_batch))
                                    .enable_prefix_caching(false),
                                model);
  };
  auto engine = make_engine(o.kv_cache_mb);
  const int64_t vocab = cfg.vocab_size;
  decode_seconds(*engine, plain_requests(1, vocab, 4), 2, device);  // warm-up

  const double roofline = bandwidth / static_cast<double>(weight_bytes);
  std::printf("\n| measure | value | beside |\n|---|---|---|\n");
  std::printf("| copy bandwidth | %.0f GB/s | |\n", bandwidth / 1e9);
  for (int64_t b : o.batches) {
    // Untimed first: a batch size's first decode step captures its CUDA graph.
    decode_seconds(*engine, plain_requests(b, vocab, 3), 2, device);
    const double t = decode_seconds(*engine, plain_requests(b, vocab, o.steps + 1), o.steps, device);
    const double tps = static_cast<double>(b * o.steps) / t;
    if (b == 1)
      std::printf("| decode batch 1 | %.1f tokens/s | %.2f of the roofline (%.1f tokens/s) |\n", tps, tps / roofline,
                  roofline);
    else
      std::printf("| decode batch %lld | %.1f tokens/s | |\n", static_cast<long long>(b), tps);
    std::fflush(stdout);
  }
  // What the CUDA graphs and the hand-written CUDA kernels are worth, at the
  // smallest and largest batch: the same decode eager with the kernels, and
  // on the ATen path (kernels off, which also rules the graphs out).
  if (kernels::cuda_kernels_built() && device.is_cuda()) {
    for (int64_t b : {o.batches.front(), max_batch}) {
      double graphs = 1e30, eager = 1e30, aten = 1e30;
      for (int64_t r = 0; r < 2; ++r) {  // alternating, the better of two each
        graphs = std::min(graphs, decode_seconds(*engine, plain_requests(b, vocab, o.steps + 1), o.steps, device));
        {
          runner::UseDecodeGraphs off(false);
          eager = std::min(eager, decode_seconds(*engine, plain_requests(b, vocab, o.steps + 1), o.steps, device));
        }
        {
          kernels::UseCudaKernels off(false);
          aten = std::min(aten, decode_seconds(*engine, plain_requests(b, vocab, o.steps + 1), o.steps, device));
        }
      }
      const auto tps = [&](double t) { return static_cast<double>(b * o.steps) / t; };
      std::printf("| decode batch %lld eager (no CUDA graphs) | %.1f tokens/s | graphs %.2fx |\n",
                  static_cast<long long>(b), tps(eager), eager / graphs);
      std::printf(
          "| decode batch %lld on the ATen path (NNSIGHT_CUDA_KERNELS=0, eager) | %.1f tokens/s | kernels %.2fx "
          "eager |\n",
          static_cast<long long>(b), tps(aten), aten / eager);
      std::fflush(stdout);
      if (o.batches.size() == 1) break;
    }
  }
  // Batch-invariant matmuls (core/kernels/fixed_rows_linear.h): what they
  // cost, on an engine of their own whose graphs are captured with them.
  if (device.is_cuda()) {
    kernels::UseFixedRows fixed(128);
    auto invariant = make_engine(std::min<int64_t>(o.kv_cache_mb, 4096));
    for (int64_t b : {o.batches.front(), max_batch}) {
      decode_seconds(*invariant, plain_requests(b, vocab, 3), 2, device);
      const double with = decode_seconds(*invariant, plain_requests(b, vocab, o.steps + 1), o.steps, device);
      const double without = decode_seconds(*engine, plain_requests(b, vocab, o.steps + 1), o.steps, device);
      std::printf(
          "| decode batch %lld, batch-invariant matmuls (NNSIGHT_FIXED_ROWS=128) | %.1f tokens/s | %.2fx "
          "the default's time |\n",
          static_cast<long long>(b), static_cast<double>(b * o.steps) / with, with / without);
      if (o.batches.size() == 1) break;
    }
  }
  // One long prompt's prefill: the better of three.
  const auto prefill_seconds = [&] {
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      runner::RequestInput in;
      in.prompt_token_ids = prompt(o.prefill, vocab, 99 + r);
      in.params = greedy(1);
      engine->add_request(std::move(in));
      sync(device);
      auto p0 = clock_type::now();
      engine->step();
      sync(device);
      best = std::min(best, since(p0));
      testing::run_to_completion(*engine);
    }
    return best;
  };
  const double best = prefill_seconds();
  std::printf("| prefill %lld tokens | %.0f tokens/s | |\n", static_cast<long long>(o.prefill),
              static_cast<double>(o.prefill) / best);
  if (device.is_cuda()) {
    // What the varlen flash attention is worth (paged_attention_flash.h).
    kernels::UseFlashAttention off(false);
    const double padded = prefill_seconds();
    std::printf("| prefill %lld tokens, padded attention (NNSIGHT_FLASH_ATTENTION=0) | %.0f tokens/s | flash %.2fx |\n",
                static_cast<long long>(o.prefill), static_cast<double>(o.prefill) / padded, padded / best);
  }

  // Trace costs, alternating the variants round after round; median ratio.
  const int64_t mid = cfg.num_layers / 2;
  std::string all_layers;
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    all_layers += (l ? ", " : "") + save_layer(l, 1 + 2 * l, "h" + std::to_string(l));
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"save one layer every step", every_step(save_layer(mid, 1, "h"))},
      {"steer one layer every step", every_step(steer_layer(mid, cfg.hidden_size))},
      {"save every layer every step", every_step(all_layers)}};
  // Each ratio against the untraced decode as it runs (CUDA graphs where
  // built) and against the untraced decode eager: saving traces replay
  // graphs of their own (captured in the first round), steering runs eager.
  std::vector<std::vector<double>> ratios(variants.size()), eager_ratios(variants.size());
  for (int64_t r = 0; r < o.rounds; ++r) {
    const double plain = decode_seconds(*engine, plain_requests(o.trace_batch, vocab, o.steps + 1), o.steps, device);
    double plain_eager = 0;
    {
      runner::UseDecodeGraphs off(false);
      plain_eager = decode_seconds(*engine, plain_requests(o.trace_batch, vocab, o.steps + 1), o.steps, device);
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      const double traced = decode_seconds(
          *engine, traced_requests(*engine, variants[v].second, o.trace_batch, vocab, o.steps + 1), o.steps, device);
      ratios[v].push_back(traced / plain);
      eager_ratios[v].push_back(traced / plain_eager);
    }
  }
  const auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  for (size_t v = 0; v < variants.size(); ++v)
    std::printf("| %s, batch %lld | %.3fx untraced | %.3fx untraced eager; median of %lld rounds |\n",
                variants[v].first.c_str(), static_cast<long long>(o.trace_batch), median(ratios[v]),
                median(eager_ratios[v]), static_cast<long long>(o.rounds));
  return 0;
}

int main(int argc, char** argv) {
  // Each row as soon as it is measured: a run cut by the lent machine's
  // time limit keeps what it printed (stdout is a pipe to tee).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    return run(argc, argv);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
  }
  return 1;
}
