#include "support/bench_support.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

namespace nnsight::bench {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

std::optional<kernels::PackedType> packed_type_named(const std::string& name) {
  for (const kernels::PackedType t : kernels::all_packed_types()) {
    std::string lower = kernels::packed_traits(t).name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == name) return t;
  }
  return std::nullopt;
}

kernels::PackedMatrix random_packed_matrix(kernels::PackedType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const kernels::PackedTypeTraits& t = kernels::packed_traits(type);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * (cols / t.block_size) * t.block_bytes));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng() & 0x3F);
  return kernels::make_packed_matrix(type, rows, cols, bytes.data());
}

std::vector<std::string> corpus_documents(const std::string& text) {
  std::vector<std::string> docs;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find("\n\n", begin);
    if (end == std::string::npos) end = text.size();
    docs.push_back(text.substr(begin, std::min(end + 2, text.size()) - begin));
    begin = end + 2;
  }
  return docs;
}

std::vector<int64_t> parse_int_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

double measure_copy_bandwidth(int64_t bytes) {
  // The copy is split over LibTorch's intra-op threads, the same threads a
  // decode step streams its weights with: one thread alone cannot saturate
  // the memory system on most machines, so a single-threaded memcpy would
  // understate the bandwidth and flatter the floor.
  std::vector<char> a(static_cast<size_t>(bytes), 1), b(static_cast<size_t>(bytes), 2);
  const int64_t grain = int64_t(1) << 20;
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    double t0 = now();
    at::parallel_for(0, bytes, grain, [&](int64_t begin, int64_t end) {
      std::memcpy(b.data() + begin, a.data() + begin, static_cast<size_t>(end - begin));
    });
    best = std::min(best, now() - t0);
    std::swap(a, b);
  }
  return 2.0 * static_cast<double>(bytes) / best;
}

double measure_linear_flops(int64_t rows, int64_t k, int64_t n, bool bf16) {
  auto dt = bf16 ? at::kBFloat16 : at::kFloat;
  at::Tensor x = at::randn({rows, k}).to(dt), w = at::randn({n, k}).to(dt);
  for (int i = 0; i < 3; ++i) at::linear(x, w);
  double best = 1e30;
  for (int i = 0; i < 20; ++i) {
    double t0 = now();
    at::linear(x, w);
    best = std::min(best, now() - t0);
  }
  return 2.0 * static_cast<double>(rows * k * n) / best;
}

std::string default_model_path() {
  const char* home = std::getenv("NNSIGHT_HOME");
  std::string base = home ? home : std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") + "/.cache/nnsight";
  return base + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace nnsight::bench
