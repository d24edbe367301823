#include "front/cli/engine_options.h"

#include "front/cli/cli_options.h"
#include "front/hooks/hook_specs.h"

namespace nnsight::cli {

void add_engine_options(CLI::App& cmd, EngineOptions& o) {
  CLI::App& g = *cmd.add_option_group("Engine options");
  g.add_option("--model", o.model, "smollm2-135m, a .gguf file or a Hugging Face directory")->capture_default_str();
  g.add_option("--dtype", o.dtype, "float32 | bfloat16")->capture_default_str();
  g.add_option("--device", o.device, "cpu | cuda[:N]")->capture_default_str();
  add_integer(g, "--seed-engine", o.seed, "seed for requests that bring none", 0);
  g.add_option("--executor", o.executor, "inproc | mp (worker processes)")->capture_default_str();
  add_integer(g, "--tensor-parallel-size", o.tensor_parallel_size, "ranks the model is split over", 1, 1024);
  g.add_option("--tp-rendezvous", o.tp_rendezvous, "tcp://HOST:PORT where ranks meet (docs/tensor_parallel.md)");
  g.add_option("--worker-addresses", o.worker_addresses, "H:P,H:P,...: workers started by hand, rank order");
  g.add_option("--worker-secret-file", o.worker_secret_file,
               "secret shared with workers started by hand (or NNSIGHT_WORKER_SECRET)");
  add_integer(g, "--max-worker-restarts", o.max_worker_restarts,
              "restarts after worker failures; -1 = always, 0 = never", -1);
  g.add_option("--function-plugins", o.function_plugins,
               "LIB.so,...: libraries registering user functions (docs/functions.md)");
  g.add_option("--attach", o.attach,
               "NAME=FILE@HOOK_POINT: an SAE, probe or steering vector under NAME (repeatable; "
               "docs/attached-modules.md)")
      ->allow_extra_args(false);
  add_integer(g, "--threads", o.threads, "intra-op threads; 0 = all cores", 0, 4096);
  add_integer(g, "--max-num-seqs", o.max_num_seqs, "sequences per step", 1);
  add_integer(g, "--max-num-batched-tokens", o.max_num_batched_tokens, "tokens per step", 1);
  add_integer(g, "--kv-cache-mb", o.kv_cache_mb, "KV-cache memory", 1);
  add_integer(g, "--block-size", o.block_size, "tokens per KV-cache block", 1, 1024);
  add_integer(g, "--intervention-memory-mb", o.intervention_memory_mb,
              "working memory per traced request; 0 = sized for the machine", 0);
  g.add_flag("--no-prefix-caching", o.no_prefix_caching, "do not share KV blocks between equal prompt prefixes");
  g.add_flag("--no-chunked-prefill", o.no_chunked_prefill, "prefill each prompt in one step");
  g.add_flag("--no-progress", o.no_progress, "no progress bar while loading");
  g.add_flag("--dequantize", o.dequantize, "GGUF weights decoded to dtype at load, not kept packed (docs/weights.md)");
  g.add_flag("--fast-untraced", o.fast_untraced,
             "untraced requests' rows with 8-bit activations: faster, not exact; traced rows stay exact "
             "(docs/weights.md)");
  g.add_flag("--enforce-eager", o.enforce_eager, "no CUDA graphs: every step runs eager (docs/design.md)");
  g.add_option("--forward-hooks", o.forward_hooks, "FILE|JSON: forward-hook specs (docs/hooks.md)");
  g.add_option("--engine-id", o.engine_id, "names the engine's shared-memory segments");
  g.add_flag("--capture", o.capture, "activation capture into shared memory (docs/capture.md)");
  g.add_option("--capture-layers", o.capture_layers, "0,5,10-12; empty = all");
  add_number(g, "--capture-sample-rate", o.capture_sample_rate, "fraction of requests captured", 0, 1);
  add_integer(g, "--capture-compression-k", o.capture_compression_k, "top-k values kept per row; 0 = off", 0);
  add_number(g, "--capture-buffer-gb", o.capture_buffer_gb, "ring size per rank", 0, 1 << 20);
}

EngineArgs engine_args_from(const CLI::App& cmd, const EngineOptions& o) {
  auto given = [&cmd](const char* flag) { return cmd.count(flag) > 0; };
  EngineArgs e;
  e.model(o.model).dtype(o.dtype).device(o.device).executor(o.executor);
  if (given("--seed-engine")) e.seed(static_cast<uint64_t>(o.seed));
  e.tensor_parallel_size(o.tensor_parallel_size);
  if (given("--tp-rendezvous")) e.tp_rendezvous(o.tp_rendezvous);
  if (given("--worker-addresses")) e.worker_addresses(o.worker_addresses);
  e.max_worker_restarts(o.max_worker_restarts);
  if (given("--function-plugins")) e.function_plugins(o.function_plugins);
  if (given("--worker-secret-file")) e.worker_secret_file(o.worker_secret_file);
  for (const std::string& spec : o.attach) e.attach(spec);
  e.num_threads(o.threads);
  e.max_num_seqs(o.max_num_seqs).max_num_batched_tokens(o.max_num_batched_tokens);
  e.kv_cache_memory_mb(o.kv_cache_mb).block_size(o.block_size).intervention_memory_mb(o.intervention_memory_mb);
  e.enable_prefix_caching(!o.no_prefix_caching).enable_chunked_prefill(!o.no_chunked_prefill);
  e.show_progress(!o.no_progress).dequantize(o.dequantize).fast_untraced(o.fast_untraced);
  e.cuda_graphs(!o.enforce_eager);
  if (given("--forward-hooks")) e.forward_hooks(hooks::load_hook_specs(o.forward_hooks).dump());
  if (given("--engine-id")) e.engine_id(o.engine_id);
  // Each capture setter marks capture as configured (the environment's
  // NNSIGHT_CAPTURE_* then no longer fill in), so only given ones are set.
  if (o.capture) e.capture_enabled(true);
  if (given("--capture-layers")) e.capture_layers(o.capture_layers);
  if (given("--capture-sample-rate")) e.capture_sample_rate(o.capture_sample_rate);
  if (given("--capture-compression-k")) e.capture_compression_k(o.capture_compression_k);
  if (given("--capture-buffer-gb")) e.capture_buffer_size_gb(o.capture_buffer_gb);
  e.validate();
  return e;
}

}  // namespace nnsight::cli
