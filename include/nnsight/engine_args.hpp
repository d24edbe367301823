// EngineArgs: how the serving engine is built. Chainable setters; each
// default is next to its field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {

class EngineArgs {
 public:
  EngineArgs() = default;

  // A known name ("smollm2-135m"), a .gguf file, or a Hugging Face directory.
  const std::string& model() const { return model_; }
  EngineArgs& model(std::string v) {
    model_ = std::move(v);
    return *this;
  }
  // "float32" (default) or "bfloat16" (weights, activations and KV cache).
  const std::string& dtype() const { return dtype_; }
  EngineArgs& dtype(std::string v) {
    dtype_ = std::move(v);
    return *this;
  }
  // "cpu" (default) or "cuda" (needs a CUDA build of LibTorch).
  const std::string& device() const { return device_; }
  EngineArgs& device(std::string v) {
    device_ = std::move(v);
    return *this;
  }
  // Decode a block-quantized GGUF model's weights to `dtype` at load (the
  // path before packed weights). Off (default): on the CPU, Q4_0, Q4_1, Q5_0,
  // Q5_1, Q8_0, Q4_K, Q5_K and Q6_K weights stay packed as in the file and
  // are decoded inside the linear kernel (same float32 results, a quarter to
  // a seventh of the memory; docs/weights.md).
  // Rows of requests that carry no trace (no intervention, no gradients)
  // run the packed matmuls with 8-bit activations (llama.cpp's Q8 scheme:
  // faster at few rows, not exact); traced requests' rows stay bitwise exact
  // in the same step. Q4_1 / Q8_0 weights on AVX-512 VNNI CPUs; elsewhere
  // every row stays exact. Not with forward hooks or capture, which would
  // record the 8-bit rows (docs/weights.md, "Which rows run which kernels").
  bool fast_untraced() const { return fast_untraced_; }
  EngineArgs& fast_untraced(bool v) {
    fast_untraced_ = v;
    return *this;
  }  // default off

  // On a CUDA device with one rank, decode steps that no trace, hook or
  // capture touches replay CUDA graphs captured per padded batch size
  // (docs/design.md); every other step runs eager. Off: every step eager
  // (vLLM's --enforce-eager).
  bool cuda_graphs() const { return cuda_graphs_; }
  EngineArgs& cuda_graphs(bool v) {
    cuda_graphs_ = v;
    return *this;
  }  // default on

  bool dequantize() const { return dequantize_; }
  EngineArgs& dequantize(bool v) {
    dequantize_ = v;
    return *this;
  }

  // Most sequences in one step.
  int64_t max_num_seqs() const { return max_num_seqs_; }
  EngineArgs& max_num_seqs(int64_t v) {
    max_num_seqs_ = v;
    return *this;
  }  // default 64
  // Most tokens in one step (the per-step token budget).
  int64_t max_num_batched_tokens() const { return max_num_batched_tokens_; }
  EngineArgs& max_num_batched_tokens(int64_t v) {
    max_num_batched_tokens_ = v;
    return *this;
  }  // default 2048
  // Longest prompt + output; 0 = the model's context length.
  int64_t max_model_len() const { return max_model_len_; }
  EngineArgs& max_model_len(int64_t v) {
    max_model_len_ = v;
    return *this;
  }
  bool enable_chunked_prefill() const { return enable_chunked_prefill_; }
  EngineArgs& enable_chunked_prefill(bool v) {
    enable_chunked_prefill_ = v;
    return *this;
  }  // default on
  bool enable_prefix_caching() const { return enable_prefix_caching_; }
  EngineArgs& enable_prefix_caching(bool v) {
    enable_prefix_caching_ = v;
    return *this;
  }  // default on

  // Tokens per KV-cache block.
  int64_t block_size() const { return block_size_; }
  EngineArgs& block_size(int64_t v) {
    block_size_ = v;
    return *this;
  }  // default 16
  // KV-cache blocks; 0 = as many as kv_cache_memory_mb holds.
  int64_t num_kv_blocks() const { return num_kv_blocks_; }
  EngineArgs& num_kv_blocks(int64_t v) {
    num_kv_blocks_ = v;
    return *this;
  }
  int64_t kv_cache_memory_mb() const { return kv_cache_memory_mb_; }
  EngineArgs& kv_cache_memory_mb(int64_t v) {
    kv_cache_memory_mb_ = v;
    return *this;
  }  // default 1024

  // "inproc" (default: the model runs in this process) or "mp" (worker processes).
  const std::string& executor() const { return executor_; }
  EngineArgs& executor(std::string v) {
    executor_ = std::move(v);
    return *this;
  }
  // Worker processes for "mp" (each holds a tensor-parallel shard; 1 = whole model).
  int64_t tensor_parallel_size() const { return tensor_parallel_size_; }
  EngineArgs& tensor_parallel_size(int64_t v) {
    tensor_parallel_size_ = v;
    return *this;
  }  // default 1
  // A worker that does not answer a step within this many seconds is declared hung.
  double worker_timeout_s() const { return worker_timeout_s_; }
  EngineArgs& worker_timeout_s(double v) {
    worker_timeout_s_ = v;
    return *this;
  }  // default 120
  // When the worker processes fail (one died, hung or broke the protocol), the
  // requests they were running fail and the engine starts them again, this
  // many times over its life; -1: always, 0: never (the engine stops serving).
  int64_t max_worker_restarts() const { return max_worker_restarts_; }
  EngineArgs& max_worker_restarts(int64_t v) {
    max_worker_restarts_ = v;
    return *this;
  }  // default -1
  // Shared libraries that register user functions (include/nnsight/functions.hpp),
  // comma-separated; every process that runs the model loads them at start-up.
  const std::string& function_plugins() const { return function_plugins_; }
  EngineArgs& function_plugins(std::string v) {
    function_plugins_ = std::move(v);
    return *this;
  }  // default none
  // Modules attached to the served model (docs/attached-modules.md): a sparse
  // autoencoder or transcoder (SAELens layout), a linear probe or a steering
  // vector loaded from FILE and run at HOOK_POINT's output, under the path
  // NAME. Each call adds one, as "NAME=FILE@HOOK_POINT"; every process that
  // runs the model loads them once at start-up.
  EngineArgs& attach(const std::string& spec) {
    attach_ += (attach_.empty() ? "" : "\n") + spec;
    return *this;
  }  // default none
  EngineArgs& attach(const std::string& name, const std::string& file, const std::string& hook_point) {
    return attach(name + "=" + file + "@" + hook_point);
  }
  // The specs given to attach(), in order.
  std::vector<std::string> attachments() const {
    std::vector<std::string> out;
    size_t begin = 0;
    while (begin < attach_.size()) {
      size_t end = attach_.find('\n', begin);
      if (end == std::string::npos) end = attach_.size();
      out.push_back(attach_.substr(begin, end - begin));
      begin = end + 1;
    }
    return out;
  }
  EngineArgs& clear_attachments() {
    attach_.clear();
    return *this;
  }
  // File holding the secret shared with workers started by hand
  // (nnsight-worker --listen --secret-file F); empty: $NNSIGHT_WORKER_SECRET,
  // or no authentication. The engine answers each worker's challenge with it.
  const std::string& worker_secret_file() const { return worker_secret_file_; }
  EngineArgs& worker_secret_file(std::string v) {
    worker_secret_file_ = std::move(v);
    return *this;
  }  // default none
  // Path of the nnsight-worker program; empty = next to the library / on PATH.
  const std::string& worker_program() const { return worker_program_; }
  EngineArgs& worker_program(std::string v) {
    worker_program_ = std::move(v);
    return *this;
  }
  // Where tensor-parallel ranks meet: "" = a file store in a fresh temporary
  // directory (workers this engine starts); "tcp://host:port" = a TCP store
  // that rank 0 serves on host:port (docs/tensor_parallel.md).
  const std::string& tp_rendezvous() const { return tp_rendezvous_; }
  EngineArgs& tp_rendezvous(std::string v) {
    tp_rendezvous_ = std::move(v);
    return *this;
  }
  // Workers started by hand ("nnsight-worker --listen host:port"), rank order,
  // comma-separated "host:port,host:port,..."; "" = the engine starts its own.
  // Their number must equal tensor_parallel_size.
  const std::string& worker_addresses() const { return worker_addresses_; }
  EngineArgs& worker_addresses(std::string v) {
    worker_addresses_ = std::move(v);
    return *this;
  }

  // Seed for requests that bring none.
  uint64_t seed() const { return seed_; }
  EngineArgs& seed(uint64_t v) {
    seed_ = v;
    return *this;
  }  // default 0
  // Intra-op threads of the process running the model (divided among workers); 0 = all cores.
  int64_t num_threads() const { return num_threads_; }
  EngineArgs& num_threads(int64_t v) {
    num_threads_ = v;
    return *this;
  }
  // Show a progress bar on stderr while loading, when it is a terminal.
  bool show_progress() const { return show_progress_; }
  EngineArgs& show_progress(bool v) {
    show_progress_ = v;
    return *this;
  }  // default on

  // Memory one request's intervention may hold at once (checked before each
  // allocation of its graph's ops); 0 = a sixteenth of physical memory,
  // between 256 MiB and 1.5 GiB.
  int64_t intervention_memory_mb() const { return intervention_memory_mb_; }
  EngineArgs& intervention_memory_mb(int64_t v) {
    intervention_memory_mb_ = v;
    return *this;
  }  // default 0

  // ---- looking inside the served model
  // SGLang-style forward hooks: a JSON list of {"name", "target_modules": [globs],
  // "hook_factory": "module:factory", "config": {...}} attached at start-up, or the
  // path of a file holding it (docs/hooks.md).
  const std::string& forward_hooks() const { return forward_hooks_; }
  EngineArgs& forward_hooks(std::string json) {
    forward_hooks_ = std::move(json);
    return *this;
  }
  // Single-pass activation capture into shared memory (docs/capture.md). Unset
  // fields fall back to the NNSIGHT_CAPTURE_* environment variables.
  bool capture_enabled() const { return capture_enabled_; }
  EngineArgs& capture_enabled(bool v) {
    capture_enabled_ = v;
    capture_set_ = true;
    return *this;
  }  // default off
  const std::string& capture_layers() const { return capture_layers_; }
  EngineArgs& capture_layers(std::string v) {
    capture_layers_ = std::move(v);
    return *this;
  }  // "0,5,10-12"; "" = all
  double capture_sample_rate() const { return capture_sample_rate_; }
  EngineArgs& capture_sample_rate(double v) {
    capture_sample_rate_ = v;
    return *this;
  }  // fraction of requests; default 1
  int64_t capture_compression_k() const { return capture_compression_k_; }
  EngineArgs& capture_compression_k(int64_t v) {
    capture_compression_k_ = v;
    return *this;
  }  // 0 = off
  double capture_buffer_size_gb() const { return capture_buffer_size_gb_; }
  EngineArgs& capture_buffer_size_gb(double v) {
    capture_buffer_size_gb_ = v;
    return *this;
  }  // per rank; default 0.25
  bool capture_configured() const { return capture_set_; }
  // Names this engine's shared-memory segments; "" = derived from the process id.
  const std::string& engine_id() const { return engine_id_; }
  EngineArgs& engine_id(std::string v) {
    engine_id_ = std::move(v);
    return *this;
  }

  // A model served by `nnsight serve` ("http://host:port"): LanguageModel
  // records traces here, checks them against the server's model structure and
  // runs them there (docs/server.md). model() names the served model (its
  // default is accepted for any); the engine options are the server's. "" =
  // load the model in this process.
  const std::string& remote() const { return remote_; }
  EngineArgs& remote(std::string v) {
    remote_ = std::move(v);
    return *this;
  }  // default ""
  // The API key sent to a remote server ("Authorization: Bearer ..."); empty:
  // $NNSIGHT_API_KEY, or none.
  const std::string& api_key() const { return api_key_; }
  EngineArgs& api_key(std::string v) {
    api_key_ = std::move(v);
    return *this;
  }  // default ""

  // Throws nnsight::ConfigError naming the first bad field.
  void validate() const;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(model_, dtype_, device_, max_num_seqs_, max_num_batched_tokens_, max_model_len_, enable_chunked_prefill_,
       enable_prefix_caching_, block_size_, num_kv_blocks_, kv_cache_memory_mb_, executor_, tensor_parallel_size_,
       worker_timeout_s_, worker_program_, seed_, num_threads_, show_progress_, forward_hooks_, capture_enabled_,
       capture_set_, capture_layers_, capture_sample_rate_, capture_compression_k_, capture_buffer_size_gb_, engine_id_,
       tp_rendezvous_, worker_addresses_, intervention_memory_mb_, dequantize_, max_worker_restarts_, function_plugins_,
       worker_secret_file_, attach_, fast_untraced_, cuda_graphs_);
  }

 private:
  std::string model_ = "smollm2-135m";
  std::string dtype_ = "float32";
  std::string device_ = "cpu";
  bool dequantize_ = false;
  bool fast_untraced_ = false;
  bool cuda_graphs_ = true;
  int64_t max_num_seqs_ = 64;
  int64_t max_num_batched_tokens_ = 2048;
  int64_t max_model_len_ = 0;
  bool enable_chunked_prefill_ = true;
  bool enable_prefix_caching_ = true;
  int64_t block_size_ = 16;
  int64_t num_kv_blocks_ = 0;
  int64_t kv_cache_memory_mb_ = 1024;
  int64_t intervention_memory_mb_ = 0;
  std::string executor_ = "inproc";
  int64_t tensor_parallel_size_ = 1;
  double worker_timeout_s_ = 120.0;
  int64_t max_worker_restarts_ = -1;
  std::string function_plugins_;
  std::string attach_;  // specs, one per line
  std::string worker_secret_file_;
  std::string remote_;
  std::string api_key_;
  std::string worker_program_;
  std::string tp_rendezvous_;
  std::string worker_addresses_;
  uint64_t seed_ = 0;
  int64_t num_threads_ = 0;
  bool show_progress_ = true;
  std::string forward_hooks_;
  bool capture_enabled_ = false;
  bool capture_set_ = false;
  std::string capture_layers_;
  double capture_sample_rate_ = 1.0;
  int64_t capture_compression_k_ = 0;
  double capture_buffer_size_gb_ = 0.25;
  std::string engine_id_;
};

}  // namespace nnsight
