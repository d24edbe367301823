// Executor: runs a step's SchedulerOutput on the model, wherever the model
// lives -- in this process (InProcExecutor) or in worker processes
// (MultiProcExecutor).
#pragma once

#include <cstdint>
#include <memory>

#include <nnsight/engine_args.hpp>

#include "core/model_config.h"
#include "runner/model_runner/model_structure.h"
#include "runner/step/step_data.h"

namespace nnsight::runner {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs one step. Throws WorkerError when a worker died or hung; the engine
  // then fails the step's requests.
  virtual ModelRunnerOutput execute(const SchedulerOutput& step) = 0;
  virtual int64_t num_kv_blocks() const = 0;
  virtual const ModelConfig& model_config() const = 0;
  virtual const ModelStructure& model_structure() const = 0;
  virtual void shutdown() {}
  // After execute() failed: starts the workers afresh (empty KV caches).
  // False, with the reason in *error, when this executor cannot or it failed.
  virtual bool restart(std::string* error) {
    *error = "this executor cannot restart";
    return false;
  }
};

// Builds the executor EngineArgs ask for (loads the model).
std::unique_ptr<Executor> make_executor(const EngineArgs& args);

}  // namespace nnsight::runner
