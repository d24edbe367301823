#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <chrono>
#include <iostream>
#include "models/causal_lm.h"
#include "support/bench_support.h"
using namespace nnsight;
int main(int argc, char** argv) {
  at::set_num_threads(2);
  c10::InferenceMode guard;
  ModelConfig c; c.architecture="llama"; c.vocab_size=49152; c.hidden_size=576; c.intermediate_size=1536; c.num_layers=30; c.num_heads=9; c.num_kv_heads=3; c.head_dim=64; c.max_position=8192; c.rope_theta=100000; c.tie_word_embeddings=true;
  auto dt = argc > 1 ? at::kBFloat16 : at::kFloat;
  auto m = create_causal_lm(c, tp::ParallelContext{}, at::TensorOptions().dtype(dt));
  for (auto& p : m->parameters()) p.normal_(0, 0.02);
  auto kv = allocate_kv_caches(30, 64, 16, 3, 64, at::TensorOptions().dtype(dt));
  std::vector<int32_t> blocks(64); for (int i=0;i<64;++i) blocks[i]=i;
  // prefill 128
  auto meta = batching::build_batch_meta({{0, 128, blocks, true}}, 16);
  auto ids = at::randint(0, 49152, {128}, at::kLong);
  auto t0 = std::chrono::steady_clock::now();
  auto h = m->forward(ids, meta, kv); auto l = m->compute_logits(h, meta.logits_rows);
  double pf = std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count();
  std::cout << "prefill 128: " << pf*1e3 << " ms\n";
  double best=1e9, tot=0; int n=20;
  for (int s=0;s<n;++s) {
    auto meta2 = batching::build_batch_meta({{128+s, 1, blocks, true}}, 16);
    auto id = at::randint(0, 49152, {1}, at::kLong);
    auto t1 = std::chrono::steady_clock::now();
    auto h2 = m->forward(id, meta2, kv); auto l2 = m->compute_logits(h2, meta2.logits_rows);
    double dtm = std::chrono::duration<double>(std::chrono::steady_clock::now()-t1).count();
    best = std::min(best, dtm); tot += dtm;
  }
  std::cout << "decode: best " << best*1e3 << " ms mean " << tot/n*1e3 << " ms\n";
  double bw = bench::measure_copy_bandwidth();
  std::cout << "copy bw " << bw/1e9 << " GB/s; floor " << (dt==at::kFloat? 0.538e9: 0.269e9)/bw*1e3 << " ms\n";
}
