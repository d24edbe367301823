#include "front/trace_worker/tracing_extension.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <set>

#include <nnsight/error.hpp>

#include "core/memory_budget.h"

#include "front/trace_worker/interleaver.h"
#include "front/trace_worker/worker_functions.h"
#include "runner/model_runner/model_runner.h"

namespace nnsight::tracing {

namespace {

// Loads each library of EngineArgs::function_plugins once per process; their
// static initializers register functions (NNSIGHT_FUNCTION).
void load_function_plugins(const std::string& list) {
  static std::mutex mu;
  static std::set<std::string> loaded;
  std::lock_guard<std::mutex> lock(mu);
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    std::string path = list.substr(begin, end - begin);
    path.erase(0, path.find_first_not_of(" \t"));
    path.erase(path.find_last_not_of(" \t") + 1);
    begin = end + 1;
    if (path.empty() || loaded.count(path)) continue;
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* e = ::dlerror();
      throw ConfigError("EngineArgs.function_plugins: cannot load '" + path + "': " + (e ? e : "unknown error"));
    }
    loaded.insert(path);
  }
}

}  // namespace

void attach_tracing(runner::RunnerExtensionContext& ctx) {
  load_function_plugins(ctx.args.function_plugins());
  ctx.runner.set_function_names(worker_functions().names());
  InterleaverOptions options;
  options.limits = dsl::Limits();
  options.functions = &worker_functions();
  options.world_size = ctx.world_size;
  options.memory_budget_bytes = ctx.args.intervention_memory_mb() > 0 ? ctx.args.intervention_memory_mb() << 20
                                                                      : default_intervention_budget_bytes();
  ctx.runner.add_observer(std::make_shared<Interleaver>(ctx.runner, options));
}

}  // namespace nnsight::tracing
