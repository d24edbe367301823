// Shared pieces of the benchmarks: the machine's floors, measured in the
// same process as the thing they bound.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/packed_matrix.h"

namespace nnsight::bench {

// Memory copy bandwidth in bytes/s (read + write counted once each, i.e.
// 2 * bytes copied / time), best of a few copies of `bytes`, split over
// LibTorch's intra-op threads (call at::set_num_threads first).
double measure_copy_bandwidth(int64_t bytes = int64_t(256) << 20);

// fp32 matmul rate in FLOP/s for [rows, k] x [k, n] through at::linear.
double measure_linear_flops(int64_t rows, int64_t k, int64_t n, bool bf16 = false);

// "1,8,32" -> {1, 8, 32} (a command-line list; std::stoll's errors for a bad item).
std::vector<int64_t> parse_int_list(const std::string& s);

// A tokenization corpus cut into documents at blank lines ("\n\n" stays with
// the document it ends), as bench/make_tokenizer_corpus.py writes it.
std::vector<std::string> corpus_documents(const std::string& text);

// The packed type named in lower case ("q4_1"), nullopt for another name.
std::optional<kernels::PackedType> packed_type_named(const std::string& name);

// A [rows, cols] packed matrix of random blocks whose f16 fields are all
// small finite numbers (every byte below 0x40), owning its bytes.
kernels::PackedMatrix random_packed_matrix(kernels::PackedType type, int64_t rows, int64_t cols, std::mt19937& rng);

// Path of the default model (NNSIGHT_HOME or ~/.cache/nnsight + /models/...).
std::string default_model_path();

}  // namespace nnsight::bench
