#include "core/hook_taps.h"

#include <ATen/ATen.h>

#include "core/module.h"

namespace nnsight {

namespace {
thread_local HookTaps* t_active = nullptr;

// io with f applied to each defined tensor (undefined ones, Python's None, stay).
template <class F>
ModuleIO map_items(const ModuleIO& io, F f) {
  std::vector<at::Tensor> items;
  items.reserve(io.size());
  for (const at::Tensor& t : io.items()) items.push_back(t.defined() ? f(t) : t);
  if (io.is_tuple()) return ModuleIO::tuple(std::move(items));
  return items.empty() ? ModuleIO() : ModuleIO(std::move(items[0]));
}

ModuleIO copy_of(const ModuleIO& io) {
  return map_items(io, [](const at::Tensor& t) { return t.clone(); });
}

// The step's rows of a value recorded on the padded batch, as a tensor of its own.
ModuleIO rows_of(const ModuleIO& io, int64_t rows, int64_t padded_rows) {
  return map_items(io, [&](const at::Tensor& t) {
    return t.dim() > 0 && t.size(0) == padded_rows ? t.narrow(0, 0, rows).clone() : t.clone();
  });
}
}  // namespace

HookTaps::HookTaps() {
  TORCH_CHECK(t_active == nullptr, "HookTaps: a recording is already active on this thread");
  t_active = this;
}

HookTaps::~HookTaps() { t_active = nullptr; }

HookTaps* HookTaps::active() { return t_active; }

void HookTaps::record(Module& module, bool before, const ModuleIO& inputs, const ModuleIO* output) {
  Event e;
  e.module = &module;
  e.before = before;
  e.inputs = copy_of(inputs);
  if (output) e.output = copy_of(*output);
  events_.push_back(std::move(e));
}

void HookTaps::fire(const std::vector<Event>& events, int64_t rows, int64_t padded_rows) {
  for (const Event& e : events) {
    const ModuleIO inputs = rows_of(e.inputs, rows, padded_rows);
    if (e.before) {
      e.module->run_deferred_hooks(inputs, nullptr);
    } else {
      const ModuleIO output = rows_of(e.output, rows, padded_rows);
      e.module->run_deferred_hooks(inputs, &output);
    }
  }
}

}  // namespace nnsight
