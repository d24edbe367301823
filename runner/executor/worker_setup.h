// Building a model runner from EngineArgs: shared by the in-process executor
// and the worker processes, so both load and size things identically.
#pragma once

#include <memory>

#include <nnsight/engine_args.hpp>

#include "models/causal_lm.h"
#include "runner/model_runner/model_runner.h"
#include "tp/process_group.h"

namespace nnsight::runner {

// The dtype/device EngineArgs name. Throws ConfigError for an unusable device.
at::TensorOptions model_options(const EngineArgs& args);

// KV-cache blocks that fit args.kv_cache_memory_mb (or args.num_kv_blocks).
// On the CPU, throws ConfigError when `ranks_here` caches of that many
// blocks (one per tensor-parallel rank on this machine) exceed the memory
// available to this process.
int64_t kv_blocks_for(const EngineArgs& args, const CausalLM& model, int64_t ranks_here = 1);

// Context length the engine serves: args.max_model_len or the model's.
int64_t max_model_len_for(const EngineArgs& args, const ModelConfig& config);

RunnerConfig runner_config_for(const EngineArgs& args, const CausalLM& model, int64_t ranks_here = 1);

// Joins rank `rank` of a tensor-parallel group of `world_size` through
// `rendezvous` (tp/rendezvous.h): gloo for a CPU model, NCCL for a CUDA one,
// where rank r takes CUDA device (N + r) mod the visible devices for
// args.device "cuda:N" ("cuda" = "cuda:0"); args.device is set to that
// device. World size 1 joins nothing.
tp::ParallelContext join_tensor_parallel_group(EngineArgs& args, int rank, int world_size,
                                               const std::string& rendezvous);

// Resolves args.model, loads this rank's shard and builds its runner.
// `worker_rank` / `world_size` (when >= 0) are what runner extensions see as
// the worker's place, for workers whose ParallelContext is not (yet) the
// tensor-parallel group they belong to.
std::unique_ptr<ModelRunner> build_model_runner(const EngineArgs& args, const tp::ParallelContext& ctx,
                                                int worker_rank = -1, int world_size = -1);

}  // namespace nnsight::runner
