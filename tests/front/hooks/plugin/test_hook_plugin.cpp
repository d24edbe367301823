// A forward-hook plugin the tests build and load by path. Registers under the
// module name "test_plugin":
//   negate        output * -1
//   none          returns no hook (the spec must be skipped with a warning)
//   throws        the factory throws (start-up must fail with its message)
#include <stdexcept>

#include <nnsight/forward_hook.hpp>

namespace {

nnsight::ForwardHookFn make_negate(const nlohmann::json&) {
  return [](const nnsight::HookedModule&, const nnsight::HookValue&,
            const nnsight::HookValue& output) -> std::optional<nnsight::HookValue> {
    return nnsight::HookValue(-output.tensor());
  };
}

nnsight::ForwardHookFn make_none(const nlohmann::json&) { return {}; }

nnsight::ForwardHookFn make_throws(const nlohmann::json& config) {
  throw std::invalid_argument("test_plugin:throws refuses config " + config.dump());
}

}  // namespace

NNSIGHT_HOOK_FACTORY("test_plugin", negate, make_negate)
NNSIGHT_HOOK_FACTORY("test_plugin", none, make_none)
NNSIGHT_HOOK_FACTORY("test_plugin", throws, make_throws)

// A user function for graphs (include/nnsight/functions.hpp), registered when
// a process loads this library as a function plugin: 2 * x + 1.
#include <nnsight/functions.hpp>

NNSIGHT_FUNCTION("test_plugin.affine", 1, [](const std::vector<at::Tensor>& a) { return a[0].mul(2).add(1); })
