// Factories every engine has, under the module name "nnsight.hooks":
//   scale       {"factor": f}                output * f
//   add_vector  {"vector": [...], "scale": s} output + s * vector (steering; s defaults to 1)
//   zero        {}                           zeros (ablation)
// Each also takes "request_ids": [...] to act only on the rows of those
// requests (found through current_forward_batch()); without it, every row.
#include <ATen/ATen.h>

#include <nnsight/error.hpp>
#include <nnsight/forward_hook.hpp>

namespace nnsight::hooks {

namespace {

// Rows of the flat batch owned by `ids`, as an int64 index tensor; undefined
// when the config selects every row.
struct RowFilter {
  std::vector<uint64_t> ids;
  bool all = true;

  explicit RowFilter(const nlohmann::json& config) {
    if (!config.contains("request_ids")) return;
    const auto& v = config["request_ids"];
    if (!v.is_array()) throw ConfigError("nnsight.hooks: \"request_ids\" must be a list of request ids");
    for (const auto& id : v) {
      if (!id.is_number_unsigned()) throw ConfigError("nnsight.hooks: \"request_ids\" must hold non-negative integers");
      ids.push_back(id.get<uint64_t>());
    }
    all = false;
  }

  // Applies `f` to the selected rows of y ([T, ...]) and returns the result.
  template <class F>
  at::Tensor apply(const at::Tensor& y, F&& f) const {
    if (all) return f(y);
    auto batch = current_forward_batch();
    if (!batch) return y;
    if (y.dim() == 0 || y.size(0) != batch->num_tokens())
      throw ConfigError("nnsight.hooks: \"request_ids\" selects rows of modules with one row per token (" +
                        std::to_string(batch->num_tokens()) + " in this step); this output has " +
                        std::to_string(y.dim() == 0 ? 0 : y.size(0)) + " rows (an LM head or an MoE expert)");
    at::Tensor out = y.clone();
    for (uint64_t id : ids) {
      auto r = batch->find(id);
      if (!r || r->num_tokens == 0) continue;
      // The copy's rows take f of the model's rows (writing into y would be lost: the copy is returned).
      batch->rows_of(*r, out).copy_(f(batch->rows_of(*r, y)));
    }
    return out;
  }
};

double number(const nlohmann::json& config, const char* key, double fallback) {
  if (!config.contains(key)) return fallback;
  if (!config[key].is_number())
    throw ConfigError(std::string("nnsight.hooks: \"") + key + "\" must be a number, got " + config[key].dump());
  return config[key].get<double>();
}

ForwardHookFn make_scale(const nlohmann::json& config) {
  const double factor = number(config, "factor", 1.0);
  RowFilter filter(config);
  return [factor, filter](const HookedModule&, const HookValue&, const HookValue& out) -> std::optional<HookValue> {
    return HookValue(filter.apply(out.tensor(), [&](const at::Tensor& y) { return y * factor; }));
  };
}

ForwardHookFn make_add_vector(const nlohmann::json& config) {
  if (!config.contains("vector") || !config["vector"].is_array() || config["vector"].empty())
    throw ConfigError("nnsight.hooks:add_vector needs \"vector\": a non-empty list of numbers");
  std::vector<float> values;
  for (const auto& x : config["vector"]) {
    if (!x.is_number()) throw ConfigError("nnsight.hooks:add_vector: \"vector\" must hold numbers");
    values.push_back(x.get<float>());
  }
  const double s = number(config, "scale", 1.0);
  at::Tensor v = at::tensor(values) * s;  // [hidden]
  RowFilter filter(config);
  return [v, filter](const HookedModule& m, const HookValue&, const HookValue& out) -> std::optional<HookValue> {
    const at::Tensor& y = out.tensor();
    if (y.size(-1) != v.size(0))
      throw Error("nnsight.hooks:add_vector on " + m.path + ": vector has " + std::to_string(v.size(0)) +
                  " elements, the output's last dimension " + std::to_string(y.size(-1)));
    at::Tensor vv = v.to(y.options());
    return HookValue(filter.apply(y, [&](const at::Tensor& rows) { return rows + vv; }));
  };
}

ForwardHookFn make_zero(const nlohmann::json& config) {
  RowFilter filter(config);
  return [filter](const HookedModule&, const HookValue&, const HookValue& out) -> std::optional<HookValue> {
    return HookValue(filter.apply(out.tensor(), [](const at::Tensor& y) { return at::zeros_like(y); }));
  };
}

const detail::HookFactoryRegistrar kScale("nnsight.hooks", "scale", make_scale);
const detail::HookFactoryRegistrar kAddVector("nnsight.hooks", "add_vector", make_add_vector);
const detail::HookFactoryRegistrar kZero("nnsight.hooks", "zero", make_zero);

}  // namespace

}  // namespace nnsight::hooks
