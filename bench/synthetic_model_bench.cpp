// synthetic_model_bench: a Llama-3-8B-shaped model with random Q4_K weights
// (Q6_K LM head, as llama.cpp's Q4_K_M files have), written once as a GGUF
// file into a cache directory (never into git), then loaded by the engine
// with packed weights: resident memory, load time, decode tokens/s.
//
//   synthetic_model_bench [--out DIR] [--batches 1,8] [--steps 8] [--threads N]
//                         [--layers 32] [--generate-only 1] [--fast-untraced 1]
//
// --fast-untraced 1: the engine with EngineArgs::fast_untraced (its requests
// carry no trace, so every row takes the 8-bit kernels: Q4_K layers, Q6_K head).
//
// DIR defaults to $NNSIGHT_HOME/models (~/.cache/nnsight/models). The
// tokenizer is the default model's (SmolLM2), its vocabulary padded with
// placeholder tokens to Llama-3's 128256 rows. The weights are random, so
// the text is meaningless; this measures memory and speed only.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include <nnsight/llm.hpp>

#include "core/gguf/gguf_file.h"
#include "runner/engine/engine.h"
#include "support/bench_support.h"

using namespace nnsight;
using clock_type = std::chrono::steady_clock;

namespace {

struct Shapes {
  int64_t vocab = 128256, hidden = 4096, layers = 32, heads = 32, kv_heads = 8, head_dim = 128, ffn = 14336;
};

class Writer {
 public:
  explicit Writer(const std::string& path) : out_(path, std::ios::binary) {}
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) { out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); }
  void kv_str(const std::string& k, const std::string& v) { str(k), u32(8), str(v); }
  void kv_u32(const std::string& k, uint32_t v) { str(k), u32(4), u32(v); }
  void kv_f32(const std::string& k, float v) { str(k), u32(6), f32(v); }
  void kv_strs(const std::string& k, const std::vector<std::string>& v) {
    str(k), u32(9), u32(8), u64(v.size());
    for (const auto& s : v) str(s);
  }
  uint64_t pos() { return static_cast<uint64_t>(out_.tellp()); }
  void pad(uint64_t align) {
    static const char zeros[64] = {};
    while (pos() % align != 0) raw(zeros, std::min<uint64_t>(align - pos() % align, 64));
  }
  bool ok() const { return out_.good(); }

 private:
  std::ofstream out_;
};

struct Tensor {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] innermost
  uint32_t type;               // 0 F32, 12 Q4_K, 14 Q6_K
  uint64_t bytes() const {
    uint64_t n = 1;
    for (auto d : dims) n *= d;
    if (type == 0) return 4 * n;
    return n / 256 * (type == 12 ? 144 : 210);
  }
};

void write_model(const std::string& path, const Shapes& s, const std::string& tokenizer_from) {
  GgufFile tok(tokenizer_from);
  std::vector<std::string> tokens = tok.at("tokenizer.ggml.tokens").as_string_array("tokens");
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < s.vocab; ++i)
    tokens.push_back("<|synthetic_" + std::to_string(i) + "|>");
  std::vector<std::string> merges = tok.at("tokenizer.ggml.merges").as_string_array("merges");

  std::vector<Tensor> ts;
  const uint64_t h = s.hidden, kv = s.kv_heads * s.head_dim, f = s.ffn, v = s.vocab;
  ts.push_back({"token_embd.weight", {h, v}, 12});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ts.push_back({b + "attn_norm.weight", {h}, 0});
    ts.push_back({b + "attn_q.weight", {h, h}, 12});
    ts.push_back({b + "attn_k.weight", {h, kv}, 12});
    ts.push_back({b + "attn_v.weight", {h, kv}, 12});
    ts.push_back({b + "attn_output.weight", {h, h}, 12});
    ts.push_back({b + "ffn_norm.weight", {h}, 0});
    ts.push_back({b + "ffn_gate.weight", {h, f}, 12});
    ts.push_back({b + "ffn_up.weight", {h, f}, 12});
    ts.push_back({b + "ffn_down.weight", {f, h}, 12});
  }
  ts.push_back({"output_norm.weight", {h}, 0});
  ts.push_back({"output.weight", {h, v}, 14});

  const std::string tmp = path + ".partial";
  Writer w(tmp);
  w.raw("GGUF", 4);
  w.u32(3);
  w.u64(ts.size());
  w.u64(16);
  w.kv_str("general.architecture", "llama");
  w.kv_str("general.name", "synthetic-llama3-8b-q4_k");
  w.kv_u32("llama.block_count", static_cast<uint32_t>(s.layers));
  w.kv_u32("llama.context_length", 8192);
  w.kv_u32("llama.embedding_length", static_cast<uint32_t>(s.hidden));
  w.kv_u32("llama.feed_forward_length", static_cast<uint32_t>(s.ffn));
  w.kv_u32("llama.attention.head_count", static_cast<uint32_t>(s.heads));
  w.kv_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.kv_f32("llama.rope.freq_base", 500000.f);
  w.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.kv_str("tokenizer.ggml.model", "gpt2");
  w.kv_str("tokenizer.ggml.pre", tok.get_string_or("tokenizer.ggml.pre", "default"));
  w.kv_strs("tokenizer.ggml.tokens", tokens);
  w.kv_strs("tokenizer.ggml.merges", merges);
  w.kv_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tok.get_int("tokenizer.ggml.bos_token_id")));
  w.kv_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tok.get_int("tokenizer.ggml.eos_token_id")));
  uint64_t offset = 0;
  for (const auto& t : ts) {
    w.str(t.name);
    w.u32(static_cast<uint32_t>(t.dims.size()));
    for (auto d : t.dims) w.u64(d);
    w.u32(t.type);
    w.u64(offset);
    offset += (t.bytes() + 31) / 32 * 32;
  }
  w.pad(32);
  // Random blocks with small positive f16 scales (d, dmin in 2^-15..2^-14:
  // weights below about 0.06, so activations stay finite).
  std::mt19937_64 rng(1234);
  std::vector<uint64_t> buf;
  for (const auto& t : ts) {
    const uint64_t n = t.bytes();
    buf.resize((n + 7) / 8);
    if (t.type == 0) {
      std::vector<float> ones(n / 4, 1.0f);
      w.raw(ones.data(), n);
    } else {
      for (auto& x : buf) x = rng();
      uint8_t* b = reinterpret_cast<uint8_t*>(buf.data());
      const uint64_t bb = t.type == 12 ? 144 : 210;
      for (uint64_t off = 0; off < n; off += bb) {
        const uint16_t d = static_cast<uint16_t>(0x0200 + (b[off + 5] & 0x1FF));  // subnormal f16 ~ 3e-5..6e-5
        if (t.type == 12) {
          std::memcpy(b + off, &d, 2);
          std::memcpy(b + off + 2, &d, 2);
        } else {
          const uint16_t d6 = static_cast<uint16_t>(d + 0x0400);  // Q6_K: scale times int8 scales
          std::memcpy(b + off + 208, &d6, 2);
        }
      }
      w.raw(b, n);
    }
    w.pad(32);
  }
  if (!w.ok()) throw std::runtime_error("writing " + tmp + " failed");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
}

int64_t status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key)));
  return -1;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::vector<int64_t> batches = {1, 8};
  int64_t steps = 8, threads = 0, generate_only = 0, fast_untraced = 0;
  Shapes shapes;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--out")
      dir = v;
    else if (a == "--steps")
      steps = std::stoll(v);
    else if (a == "--threads")
      threads = std::stoll(v);
    else if (a == "--layers")
      shapes.layers = std::stoll(v);
    else if (a == "--generate-only")
      generate_only = std::stoll(v);
    else if (a == "--fast-untraced")
      fast_untraced = std::stoll(v);
    else if (a == "--batches") {
      batches.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) batches.push_back(std::stoll(x));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::string tokenizer_from = bench::default_model_path();
  if (dir.empty()) dir = tokenizer_from.substr(0, tokenizer_from.find_last_of('/'));
  const std::string path = dir + "/synthetic-llama3-8b-q4_k-" + std::to_string(shapes.layers) + "l.gguf";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    std::printf("writing %s ...\n", path.c_str());
    std::fflush(stdout);
    const auto t0 = clock_type::now();
    write_model(path, shapes, tokenizer_from);
    std::printf("written in %.1f s\n", seconds_since(t0));
    ::stat(path.c_str(), &st);
  }
  const double file_gb = static_cast<double>(st.st_size) / 1e9;
  std::printf("model %s: %.2f GB\n", path.c_str(), file_gb);
  if (generate_only != 0) return 0;

  at::set_num_threads(static_cast<int>(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency())));
  c10::InferenceMode guard;
  const int64_t rss0 = status_kb("VmRSS:");
  const auto t0 = clock_type::now();
  runner::Engine engine(EngineArgs()
                            .model(path)
                            .max_num_seqs(64)
                            .kv_cache_memory_mb(256)
                            .enable_prefix_caching(false)
                            .show_progress(false)
                            .fast_untraced(fast_untraced != 0)
                            .num_threads(threads));
  const double load_s = seconds_since(t0);
  std::printf("weights: packed%s\n", fast_untraced != 0 ? ", 8-bit activations (--fast-untraced)" : "");
  std::printf("load: %.2f s, resident %.2f GB -> %.2f GB\n", load_s, rss0 / 1e6, status_kb("VmRSS:") / 1e6);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int32_t> tok(3, 49151);
  for (int64_t b : batches) {
    std::vector<runner::RequestInput> reqs;
    for (int64_t i = 0; i < b; ++i) {
      runner::RequestInput in;
      for (int j = 0; j < 16; ++j) in.prompt_token_ids.push_back(tok(rng));
      in.params = SamplingParams().temperature(0).max_tokens(steps + 2).ignore_eos(true);
      reqs.push_back(in);
    }
    engine.add_requests(reqs);
    for (int i = 0; i < 2; ++i) engine.step();  // prefill, one warm-up decode
    std::vector<double> times;
    for (int64_t s = 0; s < steps; ++s) {
      const auto ts = clock_type::now();
      engine.step();
      times.push_back(seconds_since(ts));
    }
    while (engine.has_unfinished()) engine.step();
    std::sort(times.begin(), times.end());
    const double med = times[times.size() / 2];
    std::printf(
        "batch %lld: decode step %.1f ms (median of %lld) = %.2f tokens/s; resident %.2f GB (peak %.2f GB, "
        "%.2fx the file)\n",
        static_cast<long long>(b), med * 1e3, static_cast<long long>(steps), b / med, status_kb("VmRSS:") / 1e6,
        status_kb("VmHWM:") / 1e6, status_kb("VmHWM:") / 1e6 / file_gb);
    std::fflush(stdout);
  }
  return 0;
}
