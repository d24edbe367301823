// Resolving a spec's "hook_factory" path to a factory (docs/hooks.md has the
// rules users read):
//   "module:factory"   the part before the first ':' is the module
//   "a.b.factory"      no ':': the last dotted part is the factory, the rest
//                      the module (fewer than two parts is an error)
// A module is, in this order: a name some code registered factories under;
// a shared library given by path (contains '/'); a library file name
// ("libfoo.so", searched in NNSIGHT_HOOK_PATH, then by the dynamic loader);
// or a dotted name "pkg.sub" found in NNSIGHT_HOOK_PATH as libpkg_sub.so,
// pkg.sub.so or pkg/sub.so. A loaded library's factory is the one it
// registered under that module name, or its exported symbol
// nnsight_hook_factory_<factory> (what NNSIGHT_HOOK_FACTORY emits).
// Libraries stay loaded for the life of the process.
#pragma once

#include <string>
#include <vector>

#include <nnsight/forward_hook.hpp>

namespace nnsight::hooks {

// Throws ConfigError with the messages docs/hooks.md lists (invalid path,
// module not found, module without that factory, library that fails to load).
HookFactory resolve_hook_factory(const std::string& path);

// The directories of NNSIGHT_HOOK_PATH (colon-separated), in order.
std::vector<std::string> hook_search_path();

}  // namespace nnsight::hooks
