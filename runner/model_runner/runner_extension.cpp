#include "runner/model_runner/runner_extension.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace nnsight::runner {

namespace {
struct Entry {
  std::string name;
  int order = 0;
  RunnerExtension extension;
};
struct Registry {
  std::mutex mu;
  std::vector<Entry> extensions;  // sorted by (order, name)
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_runner_extension(const std::string& name, int order, RunnerExtension extension) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.extensions.erase(
      std::remove_if(r.extensions.begin(), r.extensions.end(), [&](const Entry& e) { return e.name == name; }),
      r.extensions.end());
  Entry entry{name, order, std::move(extension)};
  auto pos = std::upper_bound(r.extensions.begin(), r.extensions.end(), entry, [](const Entry& a, const Entry& b) {
    return a.order != b.order ? a.order < b.order : a.name < b.name;
  });
  r.extensions.insert(pos, std::move(entry));
}

void apply_runner_extensions(RunnerExtensionContext& ctx) {
  std::vector<Entry> copy;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    copy = r.extensions;
  }
  for (auto& e : copy) e.extension(ctx);
}

}  // namespace nnsight::runner
