#include "core/module.h"

#include <stdexcept>
#include <utility>

#include "core/hook_taps.h"
#include "core/kernels/int8_rows.h"

namespace nnsight {

const at::Tensor& ModuleIO::at(size_t i) const {
  if (i >= items_.size()) {
    throw std::out_of_range("ModuleIO: index " + std::to_string(i) + " out of range for " +
                            (tuple_ ? "a tuple of " + std::to_string(items_.size()) : "a tensor"));
  }
  return items_[i];
}
at::Tensor& ModuleIO::at(size_t i) { return const_cast<at::Tensor&>(static_cast<const ModuleIO*>(this)->at(i)); }

namespace detail {
struct HookRegistry {
  Module* owner = nullptr;
  uint64_t next_id = 1;
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre;
  std::vector<std::pair<uint64_t, ForwardHook>> post;

  bool remove(uint64_t id) {
    for (auto it = pre.begin(); it != pre.end(); ++it)
      if (it->first == id) {
        pre.erase(it);
        return true;
      }
    for (auto it = post.begin(); it != post.end(); ++it)
      if (it->first == id) {
        post.erase(it);
        return true;
      }
    return false;
  }
  bool contains(uint64_t id) const {
    for (auto& p : pre)
      if (p.first == id) return true;
    for (auto& p : post)
      if (p.first == id) return true;
    return false;
  }
};
}  // namespace detail

void HookHandle::remove() {
  if (auto reg = registry_.lock()) {
    if (reg->remove(id_) && reg->owner) reg->owner->refresh_hooked();
  }
  registry_.reset();
}

bool HookHandle::active() const {
  auto reg = registry_.lock();
  return reg && reg->contains(id_);
}

Module::Module(std::string type_name)
    : type_name_(std::move(type_name)), hooks_(std::make_shared<detail::HookRegistry>()) {
  hooks_->owner = this;
}

Module::~Module() { hooks_->owner = nullptr; }

void Module::assign_paths(const std::string& prefix) {
  path_ = prefix;
  for (auto& child : named_children()) {
    std::string child_path = prefix.empty() ? child.key() : prefix + "." + child.key();
    if (auto* m = dynamic_cast<Module*>(child.value().get())) {
      m->assign_paths(child_path);
    } else {
      // Containers (ModuleList) are not hookable themselves; walk through them.
      for (auto& grand : child.value()->named_children()) {
        if (auto* gm = dynamic_cast<Module*>(grand.value().get())) gm->assign_paths(child_path + "." + grand.key());
      }
    }
  }
}

std::vector<std::pair<std::string, Module*>> Module::named_hookable_modules(bool include_self) {
  std::vector<std::pair<std::string, Module*>> out;
  if (include_self) out.emplace_back(path_, this);
  for (auto& item : named_modules("", /*include_self=*/false)) {
    if (auto* m = dynamic_cast<Module*>(item.value().get())) out.emplace_back(m->path(), m);
  }
  return out;
}

void Module::load_all_weights(const WeightSource& source) {
  for (auto& [path, m] : named_hookable_modules()) m->load_weights(source);
}

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  uint64_t id = hooks_->next_id++;
  hooks_->pre.emplace_back(id, std::move(hook));
  refresh_hooked();
  return HookHandle(hooks_, id);
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  uint64_t id = hooks_->next_id++;
  hooks_->post.emplace_back(id, std::move(hook));
  refresh_hooked();
  return HookHandle(hooks_, id);
}

void Module::clear_hooks() {
  hooks_->pre.clear();
  hooks_->post.clear();
  refresh_hooked();
}

size_t Module::num_hooks() const { return hooks_->pre.size() + hooks_->post.size(); }
bool Module::has_pre_hooks() const { return !hooks_->pre.empty(); }
bool Module::has_forward_hooks() const { return !hooks_->post.empty(); }

void Module::refresh_hooked() { hooked_ = !hooks_->pre.empty() || !hooks_->post.empty(); }

namespace {
thread_local int t_call_scopes = 0;  // CallScopes alive on this thread
}  // namespace

// A graph's `call` runs a module on the intervention's own values, not the
// step's rows: no 8-bit activation rows inside it (core/kernels/int8_rows.h).
Module::CallScope::CallScope() {
  ++t_call_scopes;
  kernels::detail::suspend_int8_rows();
}
Module::CallScope::~CallScope() {
  --t_call_scopes;
  kernels::detail::resume_int8_rows();
}

at::Tensor Module::call(const at::Tensor&) {
  TORCH_CHECK(false, "Module::call on ", type_name_, " at '", path_, "', which is not callable");
}

at::Tensor Module::invoke_hooked(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& body) {
  if (t_call_scopes > 0) return body(x);  // a graph's call: no hooks
  // Copy each hook list when it is about to run: a hook may remove itself (or
  // others), and a pre-hook or the body may register a forward hook that must
  // still see this call's output.
  ModuleIO inputs = ModuleIO::tuple({x});
  if (HookTaps* taps = HookTaps::active()) return invoke_tapped(*taps, inputs, body);
  if (!hooks_->pre.empty()) {
    auto pre = hooks_->pre;
    for (auto& [id, hook] : pre) {
      if (auto replaced = hook(*this, inputs)) {
        inputs = replaced->is_tuple() ? std::move(*replaced) : ModuleIO::tuple({replaced->tensor()});
      }
    }
  }
  at::Tensor y;
  if (skip_output_.defined()) {
    y = std::move(skip_output_);
    skip_output_ = at::Tensor();
  } else {
    y = body(inputs.tensor());
  }
  if (hooks_->post.empty()) return y;
  auto post = hooks_->post;

  ModuleIO output = as_output(y);
  for (auto& [id, hook] : post) {
    if (auto replaced = hook(*this, inputs, output)) output = std::move(*replaced);
  }
  return output.tensor();
}

at::Tensor Module::invoke_tapped(HookTaps& taps, const ModuleIO& inputs,
                                 const std::function<at::Tensor(const at::Tensor&)>& body) {
  // The hooks run later (HookTaps::fire): no skip, no replaced value here.
  if (!hooks_->pre.empty()) taps.record(*this, /*before=*/true, inputs, nullptr);
  at::Tensor y = body(inputs.tensor());
  if (hooks_->post.empty()) return y;
  ModuleIO output = as_output(y);
  taps.record(*this, /*before=*/false, inputs, &output);
  return y;
}

ModuleIO Module::as_output(const at::Tensor& y) const {
  if (output_tuple_size_ == 0) return ModuleIO(y);
  std::vector<at::Tensor> items(static_cast<size_t>(output_tuple_size_));
  items[0] = y;
  return ModuleIO::tuple(std::move(items));
}

void Module::run_deferred_hooks(const ModuleIO& inputs, const ModuleIO* output) {
  if (output == nullptr) {
    auto pre = hooks_->pre;
    for (auto& [id, hook] : pre) hook(*this, inputs);
    return;
  }
  auto post = hooks_->post;
  for (auto& [id, hook] : post) hook(*this, inputs, *output);
}

}  // namespace nnsight
