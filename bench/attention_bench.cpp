// attention_bench: the CPU paged attention of decode steps, per layer call,
// as a decode step meets it: one cache per layer, and between two layers'
// calls the layer's weights streamed through the caches (so the keys and
// values come from memory, as in the engine).
//
//   ./build/bench/attention_bench [--threads 2] [--heads 9] [--kv-heads 3] [--head-dim 64]
//                                 [--layers 30] [--contexts 32,160,512,2048] [--batches 1,8]
//                                 [--evict-mb 2.2] [--steps 20]
//
// Prints, per batch and context, the median over steps of the mean time of
// one layer's call, and the keys and values it read per second.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "batching/flattener.h"
#include "core/kernels/paged_attention.h"
#include "core/kernels/parallel_chunks.h"
#include "core/kv_cache.h"
#include "support/bench_support.h"

using namespace nnsight;

int main(int argc, char** argv) {
  int64_t threads = 2, heads = 9, kv_heads = 3, d = 64, layers = 30, steps = 20;
  double evict_mb = 2.2;
  std::vector<int64_t> contexts = {32, 160, 512, 2048}, batches = {1, 8};
  const std::map<std::string, int64_t*> ints = {{"--threads", &threads},   {"--heads", &heads},
                                                {"--kv-heads", &kv_heads}, {"--head-dim", &d},
                                                {"--layers", &layers},     {"--steps", &steps}};
  const std::map<std::string, std::vector<int64_t>*> lists = {{"--contexts", &contexts}, {"--batches", &batches}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (auto it = ints.find(a); it != ints.end()) {
      *it->second = std::stoll(v);
    } else if (auto jt = lists.find(a); jt != lists.end()) {
      *jt->second = bench::parse_int_list(v);
    } else if (a == "--evict-mb") {
      evict_mb = std::stod(v);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  at::set_num_threads(static_cast<int>(threads));
  kernels::SerialLibTorchScope serial;
  const int64_t bs = 16;
  std::vector<char> junk(static_cast<size_t>(evict_mb * 1e6), 1);
  volatile char sink = 0;
  std::printf(
      "attention per layer call: %lld heads, %lld KV heads, head_dim %lld, %lld layers, %lld threads, "
      "%.1f MB streamed between layers\n\n| batch | context | us per layer | KV GB/s |\n|---|---|---|---|\n",
      static_cast<long long>(heads), static_cast<long long>(kv_heads), static_cast<long long>(d),
      static_cast<long long>(layers), static_cast<long long>(threads), evict_mb);
  for (int64_t batch : batches) {
    for (int64_t ctx : contexts) {
      const int64_t blocks_per_seq = (ctx + bs - 1) / bs;
      std::vector<KVCache> caches =
          allocate_kv_caches(layers, batch * blocks_per_seq, bs, kv_heads, d, at::TensorOptions().dtype(at::kFloat));
      for (auto& c : caches) {
        c.key.normal_();
        c.value.normal_();
      }
      std::vector<batching::SeqSlot> slots;
      for (int64_t s = 0; s < batch; ++s) {
        batching::SeqSlot slot;
        slot.id = static_cast<uint64_t>(s + 1);
        slot.token_ids = {1};
        slot.num_computed = ctx - 1;
        for (int64_t b = 0; b < blocks_per_seq; ++b)
          slot.block_table.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
        slots.push_back(slot);
      }
      const batching::FlatBatch flat = batching::flatten_slots(slots, bs);
      const at::Tensor q = at::randn({batch, heads, d});
      std::vector<double> per_layer;
      for (int64_t step = 0; step < steps + 2; ++step) {
        double total = 0;
        for (int64_t l = 0; l < layers; ++l) {
          for (size_t x = 0; x < junk.size(); x += 64) sink = sink + junk[x];
          const auto t0 = std::chrono::steady_clock::now();
          at::Tensor o = kernels::paged_attention(q, caches[static_cast<size_t>(l)], flat.meta, 0.125);
          total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        }
        if (step >= 2) per_layer.push_back(total / static_cast<double>(layers));
      }
      std::sort(per_layer.begin(), per_layer.end());
      const double us = per_layer[per_layer.size() / 2];
      const double bytes = 2.0 * static_cast<double>(batch * ctx * kv_heads * d) * 4.0;
      std::printf("| %lld | %lld | %.1f | %.1f |\n", static_cast<long long>(batch), static_cast<long long>(ctx), us,
                  bytes / us / 1e3);
      std::fflush(stdout);
    }
  }
  return 0;
}
