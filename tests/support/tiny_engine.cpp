#include "support/tiny_engine.h"

#include <stdexcept>

#include "runner/executor/inproc_executor.h"
#include "runner/model_runner/runner_extension.h"
#include "runner/executor/worker_setup.h"
#include "support/tiny_models.h"

namespace nnsight::testing {

std::shared_ptr<CausalLM> tiny_llama(uint64_t seed) {
  ModelConfig cfg = tiny_llama_config(false);
  cfg.max_position = 256;
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  randomize(*model, seed);
  return model;
}

std::unique_ptr<runner::Engine> tiny_engine(const EngineArgs& args, std::shared_ptr<CausalLM> model) {
  return tiny_engine_with_runner(args, std::move(model)).engine;
}

EngineAndRunner tiny_engine_with_runner(const EngineArgs& args, std::shared_ptr<CausalLM> model) {
  runner::RunnerConfig rc = runner::runner_config_for(args, *model);
  auto mr = std::make_unique<runner::ModelRunner>(model, rc);
  runner::RunnerExtensionContext ext{*mr, args, 0, 1};
  runner::apply_runner_extensions(ext);
  EngineAndRunner out;
  out.runner = mr.get();
  out.engine = std::make_unique<runner::Engine>(args, std::make_unique<runner::InProcExecutor>(std::move(mr)), nullptr);
  return out;
}

std::map<uint64_t, RequestOutput> run_to_completion(runner::Engine& engine) {
  std::map<uint64_t, RequestOutput> done;
  for (int guard = 0; engine.has_unfinished(); ++guard) {
    if (guard > 100000) throw std::runtime_error("run_to_completion: engine does not finish");
    for (auto& o : engine.step())
      if (o.finished) done[o.request_id] = o;
  }
  return done;
}

}  // namespace nnsight::testing
