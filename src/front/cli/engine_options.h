// Engine options shared by the subcommands (--model, --dtype, --executor, ...):
// declared once, typed, in an "Engine options" group of each subcommand's help.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <nnsight/engine_args.hpp>

namespace nnsight::cli {

struct EngineOptions {
  EngineArgs defaults;  // what an option not given stays at
  std::string model = "smollm2-135m";
  std::string dtype = defaults.dtype(), device = defaults.device(), executor = defaults.executor();
  int64_t seed = 0, tensor_parallel_size = 1, max_worker_restarts = defaults.max_worker_restarts(), threads = 0;
  std::string tp_rendezvous, worker_addresses, function_plugins, worker_secret_file, forward_hooks, engine_id;
  std::vector<std::string> attach;  // NAME=FILE@HOOK_POINT, repeatable
  int64_t max_num_seqs = defaults.max_num_seqs(), max_num_batched_tokens = defaults.max_num_batched_tokens();
  int64_t kv_cache_mb = defaults.kv_cache_memory_mb(), block_size = defaults.block_size();
  int64_t intervention_memory_mb = defaults.intervention_memory_mb();
  bool no_prefix_caching = false, no_chunked_prefill = false, no_progress = false, dequantize = false;
  bool fast_untraced = false;
  bool enforce_eager = false;
  bool capture = false;
  std::string capture_layers;
  double capture_sample_rate = 1.0, capture_buffer_gb = 0.25;
  int64_t capture_compression_k = 0;
};

// Declares the engine options on `cmd`, bound to `o`.
void add_engine_options(CLI::App& cmd, EngineOptions& o);

// The EngineArgs the parsed options of `cmd` say (validated; a --forward-hooks
// file is read here, so a malformed one fails before the model loads).
EngineArgs engine_args_from(const CLI::App& cmd, const EngineOptions& o);

}  // namespace nnsight::cli
