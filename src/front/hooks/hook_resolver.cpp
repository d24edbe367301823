#include "front/hooks/hook_resolver.h"

#include <dlfcn.h>

#include <absl/strings/match.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include <nnsight/error.hpp>

#include "front/hooks/hook_factory_registry.h"

namespace nnsight::hooks {

namespace {

// The C entry point NNSIGHT_HOOK_FACTORY exports.
using FactorySymbol = void (*)(const nlohmann::json* config, ForwardHookFn* out);

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool names_library(const std::string& module) {
  return module.find('/') != std::string::npos || absl::EndsWith(module, ".so") ||
         module.find(".so.") != std::string::npos;
}

std::string replace_all(std::string s, char from, char to) {
  for (char& c : s)
    if (c == from) c = to;
  return s;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

struct LoadedLibraries {
  std::mutex mu;
  std::map<std::string, void*> handles;  // by the name or path given to dlopen
};
LoadedLibraries& loaded() {
  static LoadedLibraries l;
  return l;
}

// dlopen with a cache. Returns null and sets `error` when loading fails.
void* load_library(const std::string& file, std::string& error) {
  LoadedLibraries& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = l.handles.find(file);
  if (it != l.handles.end()) return it->second;
  // RTLD_LOCAL: two plugins may export the same factory symbol; dlsym on
  // each handle finds its own. The library's static initializers run here
  // (they may register factories).
  void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    error = e ? e : "unknown dlopen error";
    return nullptr;
  }
  l.handles.emplace(file, h);
  return h;
}

[[noreturn]] void no_module(const std::string& module, const std::string& path, const std::string& why) {
  throw ConfigError("No module named '" + module + "' (from hook path '" + path + "'): " + why);
}

[[noreturn]] void no_attribute(const std::string& module, const std::string& name, const std::string& path) {
  throw ConfigError("Module '" + module + "' has no attribute '" + name + "' (from hook path '" + path + "')");
}

// Loads the library `module` names; returns its handle.
void* load_module_library(const std::string& module, const std::string& path) {
  const std::vector<std::string> dirs = hook_search_path();
  std::string error;
  if (module.find('/') != std::string::npos) {
    if (!is_file(module)) no_module(module, path, "no such file");
    void* h = load_library(module, error);
    if (!h) throw ConfigError("Cannot load hook module '" + module + "' (from hook path '" + path + "'): " + error);
    return h;
  }
  std::vector<std::string> candidates;
  if (names_library(module)) {
    candidates.push_back(module);
  } else {
    const std::string underscored = replace_all(module, '.', '_');
    candidates = {"lib" + underscored + ".so", module + ".so", replace_all(module, '.', '/') + ".so"};
  }
  std::vector<std::string> tried;
  for (const auto& dir : dirs) {
    for (const auto& c : candidates) {
      const std::string file = dir + "/" + c;
      tried.push_back(file);
      if (!is_file(file)) continue;
      void* h = load_library(file, error);
      if (!h)
        throw ConfigError("Cannot load hook module '" + module + "' from " + file + " (hook path '" + path +
                          "'): " + error);
      return h;
    }
  }
  if (names_library(module)) {
    // A bare library name: let the dynamic loader search (LD_LIBRARY_PATH, rpath, ld.so.cache).
    void* h = load_library(module, error);
    if (h) return h;
    no_module(module, path, error);
  }
  no_module(
      module, path,
      "not a registered hook module" + std::string(dirs.empty() ? " and NNSIGHT_HOOK_PATH is not set"
                                                                : " and none of " + join(tried, ", ") + " exists"));
}

}  // namespace

std::vector<std::string> hook_search_path() {
  std::vector<std::string> out;
  const char* env = std::getenv("NNSIGHT_HOOK_PATH");
  if (!env) return out;
  std::string s = env;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

HookFactory resolve_hook_factory(const std::string& path) {
  std::string module, name;
  const size_t colon = path.find(':');
  if (colon != std::string::npos) {
    module = path.substr(0, colon);
    name = path.substr(colon + 1);
  } else {
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos)
      throw ConfigError("Invalid hook callable path '" + path +
                        "'. Expected 'module.submodule:factory' or 'module.submodule.factory'.");
    module = path.substr(0, dot);
    name = path.substr(dot + 1);
  }
  if (module.empty()) no_module(module, path, "empty module name");

  if (hook_module_registered(module)) {
    if (auto f = find_hook_factory(module, name)) return *f;
    no_attribute(module, name, path);
  }
  void* handle = load_module_library(module, path);
  // The library may have registered factories under this very name.
  if (auto f = find_hook_factory(module, name)) return *f;
  if (name.empty()) no_attribute(module, name, path);
  ::dlerror();
  void* sym = ::dlsym(handle, ("nnsight_hook_factory_" + name).c_str());
  if (!sym) no_attribute(module, name, path);
  auto fn = reinterpret_cast<FactorySymbol>(sym);
  return [fn](const nlohmann::json& config) {
    ForwardHookFn hook;
    fn(&config, &hook);
    return hook;
  };
}

}  // namespace nnsight::hooks
