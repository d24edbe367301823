#include "front/cli/engine_options.h"

namespace nnsight::cli {

std::vector<std::string> engine_option_names() {
  return {"dtype", "device", "seed-engine", "executor", "tensor-parallel-size", "threads", "max-num-seqs",
          "max-num-batched-tokens", "kv-cache-mb", "block-size"};
}

std::vector<std::string> engine_flag_names() { return {"no-prefix-caching", "no-chunked-prefill", "no-progress"}; }

EngineArgs engine_args_from(const CliArgs& a) {
  EngineArgs e;
  e.model(a.get("model", "smollm2-135m"));
  if (a.has("dtype")) e.dtype(a.get("dtype"));
  if (a.has("device")) e.device(a.get("device"));
  if (a.has("seed-engine")) e.seed(static_cast<uint64_t>(a.get_int("seed-engine", 0)));
  if (a.has("executor")) e.executor(a.get("executor"));
  e.tensor_parallel_size(a.get_int("tensor-parallel-size", 1));
  e.num_threads(a.get_int("threads", 0));
  e.max_num_seqs(a.get_int("max-num-seqs", e.max_num_seqs()));
  e.max_num_batched_tokens(a.get_int("max-num-batched-tokens", e.max_num_batched_tokens()));
  e.kv_cache_memory_mb(a.get_int("kv-cache-mb", e.kv_cache_memory_mb()));
  e.block_size(a.get_int("block-size", e.block_size()));
  e.enable_prefix_caching(!a.has("no-prefix-caching"));
  e.enable_chunked_prefill(!a.has("no-chunked-prefill"));
  e.show_progress(!a.has("no-progress"));
  e.validate();
  return e;
}

}  // namespace nnsight::cli
