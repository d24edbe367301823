#include "core/model_path.h"

#include <sys/stat.h>

#include <cstdlib>

#include <nnsight/error.hpp>

namespace nnsight {

namespace {
struct KnownModel {
  const char* name;
  const char* file;
  const char* fetch_hint;
};
const KnownModel kKnown[] = {
    {"smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", "scripts/setup (or scripts/fetch-model) downloads it"},
};
bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
}  // namespace

std::string nnsight_home() {
  if (const char* h = std::getenv("NNSIGHT_HOME"); h && *h) return h;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/nnsight";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.cache/nnsight";
}

std::vector<std::string> known_model_names() {
  std::vector<std::string> out;
  for (const auto& k : kKnown) out.emplace_back(k.name);
  return out;
}

std::string resolve_model_path(const std::string& name_or_path) {
  for (const auto& k : kKnown) {
    if (name_or_path == k.name) {
      std::string p = nnsight_home() + "/models/" + k.file;
      if (!exists(p))
        throw LoadError("model '" + name_or_path + "' is not downloaded: " + p + " is missing; " + k.fetch_hint);
      return p;
    }
  }
  if (exists(name_or_path)) return name_or_path;
  std::string names;
  for (const auto& k : kKnown) names += (names.empty() ? "" : ", ") + std::string(k.name);
  throw LoadError("unknown model '" + name_or_path + "': not a known name (" + names +
                  ") and no such file or directory");
}

}  // namespace nnsight
