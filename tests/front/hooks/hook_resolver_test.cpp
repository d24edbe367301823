// Resolving "hook_factory" paths: the seed's error messages for malformed
// paths and missing factories, and the ways a plugin library is found
// (by path, by file name on NNSIGHT_HOOK_PATH, by dotted module name).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <ATen/ATen.h>

#include <filesystem>

#include <nnsight/error.hpp>

#include "front/hooks/hook_resolver.h"
#include "support/scratch_dir.h"

namespace nnsight::hooks {
namespace {

std::string error_of(const std::string& path) {
  try {
    resolve_hook_factory(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// Sets NNSIGHT_HOOK_PATH for the scope of a test.
class HookPathEnv {
 public:
  explicit HookPathEnv(const std::string& value) {
    if (const char* old = std::getenv("NNSIGHT_HOOK_PATH")) old_ = old, had_ = true;
    ::setenv("NNSIGHT_HOOK_PATH", value.c_str(), 1);
  }
  ~HookPathEnv() {
    if (had_)
      ::setenv("NNSIGHT_HOOK_PATH", old_.c_str(), 1);
    else
      ::unsetenv("NNSIGHT_HOOK_PATH");
  }

 private:
  std::string old_;
  bool had_ = false;
};

// Calls the hook a factory returns on a small tensor.
at::Tensor run_hook(const HookFactory& factory, const at::Tensor& y) {
  ForwardHookFn hook = factory(nlohmann::json::object());
  EXPECT_TRUE(static_cast<bool>(hook));
  auto out = hook(HookedModule{"m", "M"}, HookValue::tuple({y}), HookValue(y));
  EXPECT_TRUE(out.has_value());
  return out ? out->tensor() : at::Tensor();
}

TEST(HookResolver, PathWithoutColonOrDotIsInvalid) {
  EXPECT_EQ(error_of("factory"),
            "Invalid hook callable path 'factory'. Expected 'module.submodule:factory' or 'module.submodule.factory'.");
  EXPECT_EQ(error_of(""),
            "Invalid hook callable path ''. Expected 'module.submodule:factory' or 'module.submodule.factory'.");
}

TEST(HookResolver, RegisteredModuleWithoutTheFactory) {
  EXPECT_EQ(error_of("nnsight.hooks:nope"),
            "Module 'nnsight.hooks' has no attribute 'nope' (from hook path 'nnsight.hooks:nope')");
  EXPECT_EQ(error_of("nnsight.hooks.nope"),
            "Module 'nnsight.hooks' has no attribute 'nope' (from hook path 'nnsight.hooks.nope')");
}

TEST(HookResolver, UnknownModuleNamesIt) {
  HookPathEnv env("/nonexistent-dir");
  const std::string e = error_of("no_such_pkg.sub:make");
  EXPECT_EQ(e.rfind("No module named 'no_such_pkg.sub' (from hook path 'no_such_pkg.sub:make')", 0), 0u) << e;
  EXPECT_NE(e.find("/nonexistent-dir/libno_such_pkg_sub.so"), std::string::npos) << e;
  const std::string e2 = error_of("/no/such/dir/libfoo.so:make");
  EXPECT_EQ(e2,
            "No module named '/no/such/dir/libfoo.so' (from hook path '/no/such/dir/libfoo.so:make'): no such file");
}

TEST(HookResolver, BuiltinsResolveBothSpellings) {
  const at::Tensor y = at::arange(6, at::kFloat).reshape({2, 3});
  auto scale = resolve_hook_factory("nnsight.hooks:scale");
  ForwardHookFn hook = scale(nlohmann::json{{"factor", 2.5}});
  auto out = hook(HookedModule{"m", "M"}, HookValue::tuple({y}), HookValue(y));
  ASSERT_TRUE(out.has_value());
  EXPECT_TRUE(at::equal(out->tensor(), y * 2.5));
  EXPECT_TRUE(at::equal(run_hook(resolve_hook_factory("nnsight.hooks.zero"), y), at::zeros_like(y)));
}

TEST(HookResolver, PluginByAbsolutePathFoundBySymbol) {
  const at::Tensor y = at::arange(4, at::kFloat);
  EXPECT_TRUE(at::equal(run_hook(resolve_hook_factory(std::string(NNSIGHT_TEST_PLUGIN) + ":negate"), y), -y));
  // Loading registered its module name too.
  EXPECT_TRUE(at::equal(run_hook(resolve_hook_factory("test_plugin:negate"), y), -y));
  const std::string missing = std::string(NNSIGHT_TEST_PLUGIN) + ":missing";
  EXPECT_EQ(error_of(missing), "Module '" + std::string(NNSIGHT_TEST_PLUGIN) +
                                   "' has no attribute 'missing' (from hook path '" + missing + "')");
}

TEST(HookResolver, PluginByFileNameOnSearchPath) {
  testing::ScratchDir dir;
  std::filesystem::copy_file(NNSIGHT_TEST_PLUGIN, dir.file("libsearched_plugin.so"));
  HookPathEnv env("/nonexistent-dir::" + dir.path());
  const at::Tensor y = at::ones({3});
  EXPECT_TRUE(at::equal(run_hook(resolve_hook_factory("libsearched_plugin.so:negate"), y), -y));
}

TEST(HookResolver, DottedModuleNamesMapToLibraryFiles) {
  testing::ScratchDir dir;
  std::filesystem::copy_file(NNSIGHT_TEST_PLUGIN, dir.file("libmy_hooks_a.so"));  // lib<pkg_sub>.so
  std::filesystem::copy_file(NNSIGHT_TEST_PLUGIN, dir.file("my_hooks.b.so"));     // <pkg.sub>.so
  std::filesystem::create_directories(dir.file("my_hooks"));
  std::filesystem::copy_file(NNSIGHT_TEST_PLUGIN, dir.file("my_hooks/c.so"));  // <pkg>/<sub>.so
  HookPathEnv env(dir.path());
  const at::Tensor y = at::full({2}, 3.0);
  EXPECT_TRUE(at::equal(run_hook(resolve_hook_factory("my_hooks.a.negate"), y), -y));
  EXPECT_TRUE(at::equal(run_hook(resolve_hook_factory("my_hooks.b:negate"), y), -y));
  EXPECT_TRUE(at::equal(run_hook(resolve_hook_factory("my_hooks.c.negate"), y), -y));
  EXPECT_EQ(error_of("my_hooks.a:absent"),
            "Module 'my_hooks.a' has no attribute 'absent' (from hook path 'my_hooks.a:absent')");
}

TEST(HookResolver, FileThatIsNotALibraryFailsWithTheLoaderMessage) {
  testing::ScratchDir dir;
  const std::string bogus = dir.write("libbogus.so", "not an ELF file");
  const std::string e = error_of(bogus + ":make");
  EXPECT_EQ(e.rfind("Cannot load hook module '" + bogus + "' (from hook path '" + bogus + ":make'): ", 0), 0u) << e;
}

TEST(HookResolver, SearchPathSplitsOnColonsAndSkipsEmptyEntries) {
  HookPathEnv env(":/a::/b/c:");
  EXPECT_EQ(hook_search_path(), (std::vector<std::string>{"/a", "/b/c"}));
}

}  // namespace
}  // namespace nnsight::hooks
