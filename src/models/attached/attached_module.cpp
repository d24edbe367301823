#include "models/attached/attached_module.h"

#include <ATen/ATen.h>

#include <cctype>

#include <nnsight/error.hpp>

#include "core/shape_string.h"
#include "models/causal_lm.h"

namespace nnsight {

AttachedModule::AttachedModule(std::string type_name, std::string source, int64_t d_in)
    : Module(std::move(type_name)), source_(std::move(source)), d_in_(d_in) {}

std::string AttachedModule::what() const { return "attached module '" + path() + "' (" + source_ + ")"; }

HookHandle AttachedModule::splice() {
  TORCH_CHECK(host_ != nullptr, "AttachedModule::splice before attach_module");
  return host_->register_forward_hook([this](Module&, const ModuleIO&, const ModuleIO& out) -> std::optional<ModuleIO> {
    if (out.empty() || !out.at(0).defined()) return std::nullopt;
    const at::Tensor& x = out.at(0);  // [rows, d_in]
    if (x.dim() < 1 || x.size(-1) != d_in_)
      throw ConfigError(what() + ": d_in is " + std::to_string(d_in_) + " but the output of its hook point '" +
                        host_path_ + "' is " + shape_string(x.sizes()));
    std::optional<at::Tensor> y = run_at_host(x);
    if (!y) return std::nullopt;
    ModuleIO replaced = out;
    replaced.at(0) = y->to(x.scalar_type());
    return replaced;
  });
}

namespace {
bool plain_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}
}  // namespace

void attach_module(CausalLM& model, const std::string& name, std::shared_ptr<AttachedModule> module,
                   const std::string& hook_point) {
  const std::string head = "attached module '" + name + "' (" + module->source() + ")";
  if (!plain_identifier(name))
    throw ConfigError(head + ": the name must be letters, digits and '_' (it becomes a module path), got '" + name +
                      "'");
  for (auto& child : model.named_children())
    if (child.key() == name) throw ConfigError(head + ": the model already has a module called '" + name + "'");
  Module* host = nullptr;
  for (auto& [path, m] : model.named_hookable_modules(false))
    if (path == hook_point) host = m;
  if (host == nullptr || hook_point.empty())
    throw ConfigError(head + ": no module '" + hook_point +
                      "' to attach to (hook points are module paths such as 'model.layers.3')");
  if (dynamic_cast<AttachedModule*>(host) != nullptr || hook_point.rfind(name + ".", 0) == 0)
    throw ConfigError(head + ": the hook point '" + hook_point + "' is inside an attached module");
  if (host->output_sharding() != nullptr)
    throw ConfigError(head + ": the output of '" + hook_point +
                      "' is split across tensor-parallel ranks; attach to a module whose output is whole "
                      "(a decoder layer, an MLP, a norm)");
  module->to_options(model.options());
  model.register_module(name, module);
  module->host_ = host;
  module->host_path_ = hook_point;
  module->assign_paths(name);
}

std::vector<AttachedModule*> attached_modules(CausalLM& model) {
  std::vector<AttachedModule*> out;
  for (auto& child : model.named_children())
    if (auto* a = dynamic_cast<AttachedModule*>(child.value().get())) out.push_back(a);
  return out;
}

}  // namespace nnsight
