// InProcExecutor: the model runs in the engine's own process.
#pragma once

#include <memory>

#include "runner/executor/executor.h"
#include "runner/model_runner/model_runner.h"

namespace nnsight::runner {

class InProcExecutor final : public Executor {
 public:
  explicit InProcExecutor(std::unique_ptr<ModelRunner> runner);
  ModelRunnerOutput execute(const SchedulerOutput& step) override;
  int64_t num_kv_blocks() const override { return runner_->config().num_blocks; }
  const ModelConfig& model_config() const override { return runner_->model().config(); }
  const ModelStructure& model_structure() const override { return runner_->structure(); }
  ModelRunner& runner() { return *runner_; }

 private:
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace nnsight::runner
