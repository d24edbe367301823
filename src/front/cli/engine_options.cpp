#include "front/cli/engine_options.h"

#include "front/hooks/hook_specs.h"

namespace nnsight::cli {

std::vector<std::string> engine_option_names() {
  return {"dtype",
          "device",
          "seed-engine",
          "executor",
          "tensor-parallel-size",
          "tp-rendezvous",
          "worker-addresses",
          "max-worker-restarts",
          "function-plugins",
          "attach",
          "worker-secret-file",
          "threads",
          "max-num-seqs",
          "max-num-batched-tokens",
          "kv-cache-mb",
          "intervention-memory-mb",
          "block-size",
          "forward-hooks",
          "engine-id",
          "capture-layers",
          "capture-sample-rate",
          "capture-compression-k",
          "capture-buffer-gb"};
}

std::vector<std::string> engine_flag_names() {
  return {"no-prefix-caching", "no-chunked-prefill", "no-progress", "capture", "dequantize"};
}

EngineArgs engine_args_from(const CliArgs& a) {
  EngineArgs e;
  e.model(a.get("model", "smollm2-135m"));
  if (a.has("dtype")) e.dtype(a.get("dtype"));
  if (a.has("device")) e.device(a.get("device"));
  if (a.has("seed-engine")) e.seed(static_cast<uint64_t>(a.get_int("seed-engine", 0)));
  if (a.has("executor")) e.executor(a.get("executor"));
  e.tensor_parallel_size(a.get_int("tensor-parallel-size", 1));
  if (a.has("tp-rendezvous")) e.tp_rendezvous(a.get("tp-rendezvous"));
  if (a.has("worker-addresses")) e.worker_addresses(a.get("worker-addresses"));
  e.max_worker_restarts(a.get_int("max-worker-restarts", e.max_worker_restarts()));
  if (a.has("function-plugins")) e.function_plugins(a.get("function-plugins"));
  for (const std::string& spec : a.all("attach")) e.attach(spec);  // NAME=FILE@HOOK_POINT, repeatable
  if (a.has("worker-secret-file")) e.worker_secret_file(a.get("worker-secret-file"));
  e.num_threads(a.get_int("threads", 0));
  e.max_num_seqs(a.get_int("max-num-seqs", e.max_num_seqs()));
  e.max_num_batched_tokens(a.get_int("max-num-batched-tokens", e.max_num_batched_tokens()));
  e.kv_cache_memory_mb(a.get_int("kv-cache-mb", e.kv_cache_memory_mb()));
  e.block_size(a.get_int("block-size", e.block_size()));
  e.intervention_memory_mb(a.get_int("intervention-memory-mb", e.intervention_memory_mb()));
  e.enable_prefix_caching(!a.has("no-prefix-caching"));
  e.enable_chunked_prefill(!a.has("no-chunked-prefill"));
  e.show_progress(!a.has("no-progress"));
  e.dequantize(a.has("dequantize"));
  if (a.has("forward-hooks")) {
    // Read a file here so a malformed one fails before the model loads; the
    // engine (and its workers) get the JSON text.
    e.forward_hooks(hooks::load_hook_specs(a.get("forward-hooks")).dump());
  }
  if (a.has("engine-id")) e.engine_id(a.get("engine-id"));
  if (a.has("capture")) e.capture_enabled(true);
  if (a.has("capture-layers")) e.capture_layers(a.get("capture-layers"));
  if (a.has("capture-sample-rate")) e.capture_sample_rate(a.get_double("capture-sample-rate", 1.0));
  if (a.has("capture-compression-k")) e.capture_compression_k(a.get_int("capture-compression-k", 0));
  if (a.has("capture-buffer-gb")) e.capture_buffer_size_gb(a.get_double("capture-buffer-gb", 0.25));
  e.validate();
  return e;
}

}  // namespace nnsight::cli
