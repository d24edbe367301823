// packed_q8_bench: the 8-bit-activation kernel (kernels::packed_linear_q8,
// for untraced rows under EngineArgs::fast_untraced) against the exact packed
// kernel (kernels::packed_linear) on one Q4_0, Q4_1, Q8_0, Q4_K, Q5_K or Q6_K matrix, alternating
// in one process, per number of rows of x.
//
//   ./build/bench/packed_q8_bench TYPE N K THREADS M...
//   ./build/bench/packed_q8_bench q4_1 1536 576 2 1 8 32 128
//
// Random blocks (scales small and finite); best of 9 alternating calls each.
// A matrix larger than the caches (e.g. 40000 x 1536) times the weights'
// stream from memory, as a decode step's matmuls are.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>

#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_linear_q8.h"
#include "core/kernels/packed_matrix.h"
#include "support/bench_support.h"

using namespace nnsight::kernels;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: packed_q8_bench TYPE N K THREADS M...\n");
    return 2;
  }
  const std::optional<PackedType> type = nnsight::bench::packed_type_named(argv[1]);
  const int64_t N = std::atol(argv[2]), K = std::atol(argv[3]);
  const int threads = std::atoi(argv[4]);
  if (!type) {
    std::fprintf(stderr, "unknown type %s\n", argv[1]);
    return 2;
  }
  if (!packed_q8_available(*type)) {
    std::printf(
        "packed_linear_q8 does not run %s on this CPU (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K with AVX-512 VNNI or "
        "AVX2)\n",
        argv[1]);
    return 0;
  }
  const int64_t block = nnsight::kernels::packed_traits(*type).block_size;
  if (K % block != 0) {
    std::fprintf(stderr, "K must be a multiple of %lld for %s\n", static_cast<long long>(block), argv[1]);
    return 2;
  }
  std::mt19937 rng(1);
  const PackedMatrix w = nnsight::bench::random_packed_matrix(*type, N, K, rng);
  at::set_num_threads(threads);
  for (int i = 5; i < argc; ++i) {
    const int64_t M = std::atol(argv[i]);
    const at::Tensor x = at::randn({M, K});
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < 9; ++rep)
      for (int p = 0; p < 2; ++p) {
        const double t0 = now();
        if (p == 0) {
          packed_linear(x, w, at::Tensor());
        } else {
          packed_linear_q8(x, w, at::Tensor());
        }
        best[p] = std::min(best[p], now() - t0);
      }
    std::printf("%s [%lld x %lld], %d threads, %lld rows: float32 %.0f us, int8 %.0f us, float32 / int8 %.2f\n",
                packed_traits(*type).name, static_cast<long long>(N), static_cast<long long>(K), threads,
                static_cast<long long>(M), best[0] * 1e6, best[1] * 1e6, best[0] / best[1]);
  }
  return 0;
}
