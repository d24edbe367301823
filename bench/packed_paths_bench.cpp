// packed_paths_bench: the packed kernel's two paths (fused tiles, decoded
// rows + float32 tiles) timed against each other for one matrix, per
// instruction set and number of rows of x: where Auto should switch
// (fused_max_rows in src/core/kernels/packed_linear.cpp).
//
//   ./build/bench/packed_paths_bench TYPE N K ISA THREADS M...
//   ./build/bench/packed_paths_bench q4_1 9216 576 avx2 2 1 4 8 16
//
// TYPE: q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k; ISA: avx512 or avx2.
// Random blocks (scales small and finite); best of 7 alternating calls each.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_matrix.h"
#include "support/bench_support.h"

using namespace nnsight::kernels;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: packed_paths_bench TYPE N K ISA THREADS M...\n");
    return 2;
  }
  const std::string name = argv[1], isa_name = argv[4];
  const int64_t N = std::atol(argv[2]), K = std::atol(argv[3]);
  const int threads = std::atoi(argv[5]);
  const std::optional<PackedType> type = nnsight::bench::packed_type_named(name);
  if (!type || (isa_name != "avx512" && isa_name != "avx2")) {
    std::fprintf(stderr, "unknown type %s or instruction set %s\n", name.c_str(), isa_name.c_str());
    return 2;
  }
  const LinearPath isa = isa_name == "avx2" ? LinearPath::Avx2 : LinearPath::Avx512;
  if (!packed_path_available(PackedPath::Fused, isa)) {
    std::printf("the %s fused path is not available on this CPU\n", isa_name.c_str());
    return 0;
  }
  const auto& traits = packed_traits(*type);
  if (K % traits.block_size != 0) {
    std::fprintf(stderr, "K must be a multiple of %lld\n", static_cast<long long>(traits.block_size));
    return 2;
  }
  std::mt19937 rng(1);
  const PackedMatrix w = nnsight::bench::random_packed_matrix(*type, N, K, rng);
  at::set_num_threads(threads);
  for (int i = 6; i < argc; ++i) {
    const int64_t M = std::atol(argv[i]);
    const at::Tensor x = at::randn({M, K});
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < 7; ++rep)
      for (int p = 0; p < 2; ++p) {
        const double t0 = now();
        packed_linear_on_path(p == 0 ? PackedPath::Fused : PackedPath::Tiles, isa, x, w, at::Tensor());
        best[p] = std::min(best[p], now() - t0);
      }
    std::printf("%s [%lld x %lld] %s, %d threads, %lld rows: fused %.0f us, tiles %.0f us, fused / tiles %.2f\n",
                traits.name, static_cast<long long>(N), static_cast<long long>(K), isa_name.c_str(), threads,
                static_cast<long long>(M), best[0] * 1e6, best[1] * 1e6, best[0] / best[1]);
  }
  return 0;
}
