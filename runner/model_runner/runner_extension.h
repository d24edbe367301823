// Runner extensions: how the layers above the runner (tracing, forward-hook
// configs, activation capture) attach to every model runner -- in this
// process or in each worker process -- without the runner knowing them.
// Each registers once, at library load, with an explicit order;
// build_model_runner applies them all.
#pragma once

#include <functional>
#include <string>

#include <nnsight/engine_args.hpp>

namespace nnsight::runner {

class ModelRunner;

struct RunnerExtensionContext {
  ModelRunner& runner;
  const EngineArgs& args;
  int rank = 0;
  int world_size = 1;
};

// Throwing from an extension fails engine start-up with that message.
using RunnerExtension = std::function<void(RunnerExtensionContext&)>;

// Registers (or replaces) the extension called `name`. Extensions run in
// ascending `order` (then by name), whatever order libraries load in: their
// observers see each step's values in that order.
void register_runner_extension(const std::string& name, int order, RunnerExtension extension);
void apply_runner_extensions(RunnerExtensionContext& ctx);

}  // namespace nnsight::runner
