// Attaches the front end's engine-wide features to every model runner (in
// this process and in each worker process), in this order:
//   1. forward_hooks (docs/hooks.md)
//   2. activation capture (docs/capture.md) -- after the hooks, so capture
//      records what the rest of the model consumes.
//   3. tracing (the interleaver): its observer runs last at each phase.
// Both register at library load; runner/model_runner/runner_extension.h runs them.
#include <unistd.h>

#include <memory>
#include <string>

#include <nnsight/error.hpp>

#include "core/log.h"
#include "front/capture/capture_config.h"
#include "front/capture/capture_observer.h"
#include "front/hooks/forward_hook_installer.h"
#include "front/hooks/hook_specs.h"
#include "front/trace_worker/tracing_extension.h"
#include "runner/model_runner/model_runner.h"
#include "runner/model_runner/runner_extension.h"

namespace nnsight {

namespace {

// Owns the hooks one runner attached: they go when the runner goes.
class ForwardHookOwner : public runner::StepObserver {
 public:
  explicit ForwardHookOwner(hooks::InstalledHooks installed) : installed_(std::move(installed)) {}

 private:
  hooks::InstalledHooks installed_;
};

void attach_forward_hooks(runner::RunnerExtensionContext& ctx) {
  if (ctx.args.forward_hooks().empty()) return;
  const nlohmann::json specs = hooks::load_hook_specs(ctx.args.forward_hooks());
  if (specs.empty()) return;
  hooks::InstalledHooks installed = hooks::install_forward_hooks(ctx.runner.model(), specs);
  if (installed.size() > 0) ctx.runner.add_observer(std::make_shared<ForwardHookOwner>(std::move(installed)));
}

void attach_capture(runner::RunnerExtensionContext& ctx) {
  const capture::CaptureConfig config = capture::resolve_capture_config(ctx.args);
  if (!config.enabled) return;
  if (ctx.runner.config().fast_untraced)  // capture set by NNSIGHT_CAPTURE_* (EngineArgs::validate saw no option)
    throw ConfigError(
        "EngineArgs.fast_untraced cannot be combined with activation capture (NNSIGHT_CAPTURE_ENABLED): it would "
        "record untraced requests' 8-bit-activation values");
  // The executor names the engine before starting workers; a runner built
  // directly (tests, in-process) falls back to this process id.
  const std::string id = ctx.args.engine_id().empty() ? std::to_string(::getpid()) : ctx.args.engine_id();
  auto observer = std::make_shared<capture::CaptureObserver>(ctx.runner.model(), config, id, ctx.rank,
                                                             ctx.runner.config().max_num_seqs);
  std::string layers;
  for (int32_t l : observer->layers()) layers += (layers.empty() ? "" : ",") + std::to_string(l);
  log_info("capture: engine '" + id + "' rank " + std::to_string(ctx.rank) + " writes layers [" + layers +
           "] to shared memory " + observer->segment_name());
  ctx.runner.add_observer(std::move(observer));
}

// The order is explicit, not the order static initializers happen to run in.
const bool kRegistered = [] {
  runner::register_runner_extension("front.forward_hooks", 10, attach_forward_hooks);
  runner::register_runner_extension("front.capture", 20, attach_capture);
  runner::register_runner_extension("front.tracing", 30, tracing::attach_tracing);
  return true;
}();

}  // namespace

}  // namespace nnsight
