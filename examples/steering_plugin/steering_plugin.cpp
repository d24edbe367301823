// steering_plugin: a forward-hook plugin library. Build it against nnsight,
// then name it in an engine's forward_hooks:
//
//   [{"name": "steer", "target_modules": ["model.layers.12"],
//     "hook_factory": "libsteering_plugin.so:add_direction",
//     "config": {"direction": [0.1, -0.3, ...], "alpha": 4.0, "last_token_only": true}}]
//
// Once loaded, its factories are also reachable as "steering:add_direction".
#include <ATen/ATen.h>

#include <stdexcept>

#include <nnsight/forward_hook.hpp>

namespace {

// Adds alpha * direction to the module's output: to every row, or (with
// "last_token_only") only to each request's last row of the step -- the
// token whose next-token prediction this forward makes.
nnsight::ForwardHookFn make_add_direction(const nlohmann::json& config) {
  if (!config.contains("direction")) throw std::invalid_argument("add_direction needs \"direction\": [numbers]");
  const std::vector<float> values = config.at("direction").get<std::vector<float>>();
  const double alpha = config.value("alpha", 1.0);
  const bool last_only = config.value("last_token_only", false);
  const at::Tensor direction = at::tensor(values) * alpha;  // [hidden]
  return [direction, last_only](const nnsight::HookedModule& module, const nnsight::HookValue&,
                                const nnsight::HookValue& output) -> std::optional<nnsight::HookValue> {
    const at::Tensor& y = output.tensor();  // [num_tokens, hidden]
    if (y.size(-1) != direction.size(0))
      throw std::invalid_argument(module.path + ": direction has " + std::to_string(direction.size(0)) +
                                  " values, hidden size is " + std::to_string(y.size(-1)));
    const at::Tensor d = direction.to(y.options());
    if (!last_only) return nnsight::HookValue(y + d);
    auto batch = nnsight::current_forward_batch();
    if (!batch) return std::nullopt;
    at::Tensor out = y.clone();
    for (size_t i = 0; i < batch->num_requests(); ++i) out[batch->request(i).last_row()] += d;
    return nnsight::HookValue(out);
  };
}

}  // namespace

NNSIGHT_HOOK_FACTORY("steering", add_direction, make_add_direction)
