#include "runner/runner_extension.h"

#include <mutex>
#include <utility>
#include <vector>

namespace nnsight::runner {

namespace {
struct Registry {
  std::mutex mu;
  std::vector<std::pair<std::string, RunnerExtension>> extensions;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_runner_extension(const std::string& name, RunnerExtension extension) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& e : r.extensions)
    if (e.first == name) {
      e.second = std::move(extension);
      return;
    }
  r.extensions.emplace_back(name, std::move(extension));
}

void apply_runner_extensions(RunnerExtensionContext& ctx) {
  std::vector<std::pair<std::string, RunnerExtension>> copy;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    copy = r.extensions;
  }
  for (auto& [name, ext] : copy) ext(ctx);
}

}  // namespace nnsight::runner
