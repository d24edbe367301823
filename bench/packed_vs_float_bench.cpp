// packed_vs_float_bench: the packed linear kernel against the float32 kernel
// on the same (dequantized) weights, alternating in one process, so that
// both see the same minutes of a shared machine: whether keeping GGUF
// weights packed costs anything at many rows (batch 32, prefill), where
// both paths run the same float32 tiles and the packed one first decodes
// each block of rows.
//
//   ./build/bench/packed_vs_float_bench [TYPE] [N] [K] [ROWS] [COPIES] [THREADS]
//   ./build/bench/packed_vs_float_bench q4_1 1536 576 32 60 2
//
// Each pass multiplies by COPIES different matrices (a decode step's 30
// layers read different weights too), so the float32 weights come from
// memory, not the caches. Random blocks with small finite scales.
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

#include "core/kernels/linear.h"
#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_matrix.h"
#include "support/bench_support.h"

using namespace nnsight::kernels;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "q4_1";
  const int64_t N = argc > 2 ? std::atol(argv[2]) : 1536, K = argc > 3 ? std::atol(argv[3]) : 576;
  const int64_t M = argc > 4 ? std::atol(argv[4]) : 32, copies = argc > 5 ? std::atol(argv[5]) : 60;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  const std::optional<PackedType> type = nnsight::bench::packed_type_named(name);
  if (!type || K % packed_traits(*type).block_size != 0 || copies < 1 || M < 1) {
    std::fprintf(stderr, "usage: packed_vs_float_bench [TYPE] [N] [K] [ROWS] [COPIES] [THREADS]\n");
    return 2;
  }
  at::set_num_threads(threads);
  std::mt19937 rng(1);
  std::vector<PackedMatrix> packed;
  std::vector<at::Tensor> dense;  // [N, K] each
  for (int64_t c = 0; c < copies; ++c) {
    packed.push_back(nnsight::bench::random_packed_matrix(*type, N, K, rng));
    dense.push_back(packed.back().dequantize());
  }
  const at::Tensor x = at::randn({M, K});  // [M, K]
  if (!at::equal(packed_linear(x, packed[0], at::Tensor()), linear(x, dense[0], at::Tensor())))
    std::printf("note: the two paths' sums differ in some bits at %lld rows\n", static_cast<long long>(M));
  constexpr int kPasses = 15;
  std::vector<double> ratios, tp, tf;
  for (int rep = 0; rep < kPasses; ++rep) {
    double t[2];
    for (int p = 0; p < 2; ++p) {
      const double t0 = now();
      for (int64_t c = 0; c < copies; ++c) {
        if (p == 0) {
          packed_linear(x, packed[static_cast<size_t>(c)], at::Tensor());
        } else {
          linear(x, dense[static_cast<size_t>(c)], at::Tensor());
        }
      }
      t[p] = now() - t0;
    }
    tp.push_back(t[0]);
    tf.push_back(t[1]);
    ratios.push_back(t[0] / t[1]);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(tp.begin(), tp.end());
  std::sort(tf.begin(), tf.end());
  std::printf("%s [%lld x %lld] x %lld copies, %lld rows, %d threads, %d alternating passes\n",
              packed_traits(*type).name, static_cast<long long>(N), static_cast<long long>(K),
              static_cast<long long>(copies), static_cast<long long>(M), threads, kPasses);
  std::printf("  packed: median pass %.2f ms; float32: %.2f ms; median packed / float32 time %.3f (%.3f-%.3f)\n",
              tp[kPasses / 2] * 1e3, tf[kPasses / 2] * 1e3, ratios[kPasses / 2], ratios.front(), ratios.back());
  return 0;
}
