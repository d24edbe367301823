#include "front/hooks/forward_hook_installer.h"

#include <ATen/ATen.h>

#include <memory>

#include <nnsight/error.hpp>
#include <nnsight/forward_hook.hpp>

#include "core/log.h"
#include "front/hooks/fnmatch.h"
#include "front/hooks/hook_resolver.h"

namespace nnsight::hooks {

namespace {

// Python truthiness of a JSON value (the seed tests `not value`).
bool truthy(const nlohmann::json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
}

std::string as_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Python's repr of a list of strings: ['a', 'b'].
std::string python_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", '" : "'") + items[i] + "'";
  return out + "]";
}

HookValue to_hook_value(const ModuleIO& io) {
  return io.is_tuple() ? HookValue::tuple(io.items()) : HookValue(io.tensor());
}

std::string shape_of(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// The Module-level hook that runs a user hook: converts values both ways and
// checks a replacement before the model consumes it.
ForwardHook adapt(std::shared_ptr<const ForwardHookFn> fn, std::shared_ptr<const HookedModule> info,
                  std::string spec_name) {
  return [fn = std::move(fn), info = std::move(info), spec_name = std::move(spec_name)](
             Module&, const ModuleIO& inputs, const ModuleIO& output) -> std::optional<ModuleIO> {
    std::optional<HookValue> r = (*fn)(*info, to_hook_value(inputs), to_hook_value(output));
    if (!r) return std::nullopt;
    const at::Tensor& before = output.tensor();
    if (r->size() == 0 || !r->tensor().defined() || r->tensor().sizes() != before.sizes())
      throw Error("forward hook '" + spec_name + "' on " + info->path + " returned a " +
                  (r->size() ? shape_of(r->tensor()) : std::string("empty")) + " value; the output is " +
                  shape_of(before));
    std::vector<at::Tensor> items = r->items();
    items[0] = items[0].to(before.options());
    if (output.is_tuple()) return ModuleIO::tuple(std::move(items));
    return ModuleIO(std::move(items[0]));
  };
}

std::vector<std::string> patterns_of(const nlohmann::json& v, size_t index) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
    return out;
  }
  if (!v.is_array())
    throw ConfigError("forward_hooks[" + std::to_string(index) + "].target_modules must be a list of strings, got " +
                      v.dump());
  for (const auto& p : v) {
    if (!p.is_string())
      throw ConfigError("forward_hooks[" + std::to_string(index) + "].target_modules must hold strings, got " +
                        p.dump());
    out.push_back(p.get<std::string>());
  }
  return out;
}

}  // namespace

InstalledHooks install_forward_hooks(Module& root, const nlohmann::json& specs) {
  InstalledHooks installed;
  if (!specs.is_array()) throw ConfigError("forward_hooks must be a JSON list of hook specs");
  const auto modules = root.named_hookable_modules(/*include_self=*/true);
  for (size_t i = 0; i < specs.size(); ++i) {
    const nlohmann::json& spec = specs[i];
    if (!spec.is_object())
      throw ConfigError("forward_hooks[" + std::to_string(i) + "] must be a JSON object, got " + spec.dump());
    const std::string name = spec.contains("name") && !spec["name"].is_null() ? as_text(spec["name"]) : "";

    const nlohmann::json targets = spec.value("target_modules", nlohmann::json());
    if (!truthy(targets)) {
      log_warning("Hook spec '" + name + "' has no 'target_modules', skipping");
      continue;
    }
    const std::vector<std::string> patterns = patterns_of(targets, i);

    const nlohmann::json factory_path = spec.value("hook_factory", nlohmann::json());
    if (!truthy(factory_path)) {
      log_warning("Hook spec '" + name + "' has no 'hook_factory', skipping");
      continue;
    }
    if (!factory_path.is_string())
      throw ConfigError("forward_hooks[" + std::to_string(i) + "].hook_factory must be a string, got " +
                        factory_path.dump());
    const std::string path = factory_path.get<std::string>();

    nlohmann::json config = spec.value("config", nlohmann::json());
    if (!truthy(config)) config = nlohmann::json::object();

    HookFactory factory = resolve_hook_factory(path);
    ForwardHookFn hook;
    try {
      hook = factory(config);
    } catch (const std::exception& e) {
      throw ConfigError("Hook factory '" + path + "' for spec '" + name + "' failed: " + e.what());
    }
    if (!hook) {
      log_warning("Hook factory '" + path + "' for spec '" + name + "' returned None, not registering any hook");
      continue;
    }

    std::vector<std::pair<std::string, Module*>> matched;
    for (const auto& [module_path, module] : modules) {
      for (const auto& p : patterns) {
        if (fnmatch(module_path, p)) {
          matched.emplace_back(module_path, module);
          break;
        }
      }
    }
    if (matched.empty()) {
      log_warning("No modules matched hook spec '" + name + "' patterns=" + python_list(patterns));
      continue;
    }
    auto shared = std::make_shared<const ForwardHookFn>(std::move(hook));
    for (const auto& [module_path, module] : matched) {
      const TensorSharding* split = module->output_sharding();
      auto info = std::make_shared<const HookedModule>(
          HookedModule{module_path, module->type_name(), split ? split->describe() : std::string()});
      installed.add(module->register_forward_hook(adapt(shared, info, name)));
      log_info("Registered forward hook '" + name + "' on " + module_path);
    }
  }
  return installed;
}

}  // namespace nnsight::hooks
