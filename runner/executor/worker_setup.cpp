#include "runner/executor/worker_setup.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <nnsight/error.hpp>

#include "core/available_memory.h"
#include "core/model_path.h"
#include "core/progress.h"
#include "core/weight_source.h"
#include "models/attached/attach_spec.h"
#include "runner/model_runner/runner_extension.h"
#include "tp/make_process_group.h"
#include "tp/nccl_process_group.h"

namespace nnsight::runner {

at::TensorOptions model_options(const EngineArgs& args) {
  at::TensorOptions opts = at::TensorOptions().dtype(args.dtype() == "bfloat16" ? at::kBFloat16 : at::kFloat);
  if (args.device() != "cpu") {
    at::Device device(args.device());
    if (device.is_cuda() && !at::hasCUDA())
      throw ConfigError("EngineArgs.device is '" + args.device() + "' but this LibTorch has no CUDA device available");
    opts = opts.device(device);
  }
  return opts;
}

int64_t max_model_len_for(const EngineArgs& args, const ModelConfig& config) {
  if (args.max_model_len() > 0) {
    if (args.max_model_len() > config.max_position)
      throw ConfigError("EngineArgs.max_model_len (" + std::to_string(args.max_model_len()) +
                        ") exceeds the model's context length (" + std::to_string(config.max_position) + ")");
    return args.max_model_len();
  }
  return config.max_position;
}

int64_t kv_blocks_for(const EngineArgs& args, const CausalLM& model, int64_t ranks_here) {
  const int64_t elem = static_cast<int64_t>(c10::elementSize(c10::typeMetaToScalarType(model.options().dtype())));
  const int64_t per_block =
      2 * model.num_layers() * args.block_size() * model.local_kv_heads() * model.head_dim() * elem;
  const bool explicit_blocks = args.num_kv_blocks() > 0;
  const int64_t blocks =
      explicit_blocks ? args.num_kv_blocks() : args.kv_cache_memory_mb() * (int64_t(1) << 20) / per_block;
  if (blocks < 1)
    throw ConfigError("EngineArgs.kv_cache_memory_mb (" + std::to_string(args.kv_cache_memory_mb()) +
                      ") holds no KV-cache block of " + std::to_string(per_block) + " bytes");
  // On the CPU the cache takes memory only as blocks are first written
  // (KVCache::allocate), so a budget the machine cannot hold would not fail
  // here but kill the process once enough tokens were cached. Every rank on
  // this machine holds a cache of this many blocks (of its own heads), so
  // together they must fit.
  if (model.options().device().is_cpu()) {
    const std::optional<int64_t> avail = available_memory_bytes();
    const int64_t ranks = std::max<int64_t>(1, ranks_here);
    if (avail && blocks > *avail / per_block / ranks) {
      const auto mb = [](int64_t bytes) { return std::to_string(bytes >> 20) + " MB"; };
      const std::string field =
          explicit_blocks ? "EngineArgs.num_kv_blocks (" + std::to_string(blocks) + ")"
                          : "EngineArgs.kv_cache_memory_mb (" + std::to_string(args.kv_cache_memory_mb()) + ")";
      const std::string each = ranks > 1 ? " on each of the " + std::to_string(ranks) +
                                               " tensor-parallel workers on this machine (" +
                                               mb(blocks * per_block * ranks) + " together)"
                                         : "";
      throw ConfigError(field + " asks for a KV cache of " + std::to_string(blocks) + " blocks of " +
                        std::to_string(per_block) + " bytes" + each + ", more than the " + mb(*avail) +
                        " of memory this process has available (MemAvailable, or its cgroup's limit); "
                        "lower it");
    }
  }
  return blocks;
}

RunnerConfig runner_config_for(const EngineArgs& args, const CausalLM& model, int64_t ranks_here) {
  RunnerConfig rc;
  rc.num_blocks = kv_blocks_for(args, model, ranks_here);
  rc.block_size = args.block_size();
  rc.max_num_batched_tokens = args.max_num_batched_tokens();
  rc.max_num_seqs = args.max_num_seqs();
  rc.max_model_len = max_model_len_for(args, model.config());
  rc.fast_untraced = args.fast_untraced();
  rc.cuda_graphs = args.cuda_graphs();
  return rc;
}

tp::ParallelContext join_tensor_parallel_group(EngineArgs& args, int rank, int world_size,
                                               const std::string& rendezvous) {
  if (world_size <= 1) return tp::ParallelContext{};
  tp::ProcessGroupOptions o;
  o.rank = rank;
  o.world_size = world_size;
  o.rendezvous = rendezvous;
  // Longer than the engine waits for a step: a rank stuck behind a hung
  // peer must not fail first and take the blame for the hang.
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>((2 * args.worker_timeout_s() + 30) * 1000));
  if (args.device().rfind("cuda", 0) == 0) {
    const int count = tp::cuda_device_count();
    if (count < 1) throw ConfigError("EngineArgs.device is '" + args.device() + "' but no CUDA device is visible");
    int first = 0;
    const auto colon = args.device().find(':');
    if (colon != std::string::npos) first = std::atoi(args.device().c_str() + colon + 1);
    o.device = (first + rank) % count;
    o.backend = "nccl";
    args.device("cuda:" + std::to_string(o.device));
  }
  return tp::ParallelContext{tp::make_process_group(o)};
}

std::unique_ptr<ModelRunner> build_model_runner(const EngineArgs& args, const tp::ParallelContext& ctx, int worker_rank,
                                                int world_size) {
  args.validate();
  const std::string path = resolve_model_path(args.model());
  auto source = open_weights(path, OpenWeightsOptions().packed(!args.dequantize()));
  auto model = create_causal_lm(source->config(), ctx, model_options(args));
  ProgressBar bar("loading " + path, static_cast<int64_t>(model->named_hookable_modules().size()),
                  args.show_progress() && ctx.rank() == 0);
  for (auto& [p, m] : model->named_hookable_modules()) {
    m->load_weights(*source);
    bar.advance();
  }
  bar.done();
  // Attached modules (SAEs, probes, steering vectors): loaded once per
  // process, before the structure probe, which records their points.
  attach_all(*model, args.attachments());
  // Workers the engine spawns itself (no worker_addresses) all run on this
  // machine; ones started by hand are counted alone (their hosts are theirs).
  const int64_t world = world_size >= 0 ? world_size : ctx.world_size();
  RunnerConfig rc = runner_config_for(args, *model, args.worker_addresses().empty() ? world : 1);
  rc.is_driver = ctx.rank() == 0;
  auto runner = std::make_unique<ModelRunner>(std::move(model), rc);
  RunnerExtensionContext ext{*runner, args, worker_rank >= 0 ? worker_rank : ctx.rank(),
                             world_size >= 0 ? world_size : ctx.world_size()};
  apply_runner_extensions(ext);
  return runner;
}

}  // namespace nnsight::runner
